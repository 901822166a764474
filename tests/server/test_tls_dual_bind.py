"""One server on HTTPS and plain HTTP at once: `--bind https://A --bind http://B`, optionally
`--redirect-http` (308 to the same target on the HTTPS port), pre-forked and in-process."""

from __future__ import annotations

import json

import pytest
import requests

from socketify.server.schemes import BindPlan, SchemeError, redirect_app
from tests.server.tls_clients import client_context, server_env
from tests.support.pki import Pki
from tests.support.ports import free_port
from tests.support.raw_client import get
from tests.support.serve import Launcher, ServerProcess, run_cli

pytestmark = pytest.mark.timeout(60)


def dual(
    serve: Launcher, pki: Pki, *, workers: int, redirect: bool
) -> tuple[ServerProcess, int, int]:
    """Start tls_app:plain on an HTTPS and an HTTP port; returns (server, https, http)."""
    https_port, http_port = free_port(), free_port()
    server = serve(
        "tests.server.tls_app:plain",
        workers=workers,
        bind=f"https://127.0.0.1:{https_port}",
        args=["--certfile", pki.server.cert, "--keyfile", pki.server.key,
              "--bind", f"http://127.0.0.1:{http_port}",
              *(["--redirect-http"] if redirect else [])],
        env=server_env(pki),
        tls=client_context(pki, client=True),
    )  # fmt: skip
    https = f"https://127.0.0.1:{https_port} (h2, http/1.1)"
    listening = f"{https}, http://127.0.0.1:{http_port} (http/1.1, h2c)"
    assert listening in server.output()
    return server, https_port, http_port


def test_http_binds_redirect_to_the_https_port_with_308(serve: Launcher, pki: Pki) -> None:
    _, https_port, http_port = dual(serve, pki, workers=2, redirect=True)
    res = get(("127.0.0.1", http_port), "/whoami?x=1&y=2")
    assert res.status == 308
    # The Host header names the host (the wire helper sends "Host: test"); the port changes.
    assert res.header("location") == f"https://test:{https_port}/whoami?x=1&y=2"
    # 308 keeps the method and the body: requests re-posts them to the HTTPS port.
    answer = requests.post(
        f"http://localhost:{http_port}/echo", data=b"sealed", verify=pki.ca, timeout=5
    )
    assert (answer.status_code, answer.content) == (200, b"sealed")
    assert answer.url == f"https://localhost:{https_port}/echo"
    assert answer.history[0].status_code == 308


def test_without_redirect_both_schemes_serve_the_app_in_process(serve: Launcher, pki: Pki) -> None:
    _, https_port, http_port = dual(serve, pki, workers=0, redirect=False)
    plain = get(("127.0.0.1", http_port), "/whoami")
    assert (plain.status, json.loads(plain.body)["scheme"]) == (200, "http")
    secure = requests.get(f"https://127.0.0.1:{https_port}/whoami", verify=pki.ca, timeout=5)
    assert secure.json()["scheme"] == "https"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bind", "https://127.0.0.1:{port}"], "--bind https://127.0.0.1:{port} needs TLS"),
        (["--certfile", "{cert}", "--keyfile", "{key}", "--bind", "127.0.0.1:{port}",
          "--redirect-http"], "--redirect-http needs an http:// bind beside an HTTPS one"),
    ],
    ids=["https-without-tls", "redirect-without-http-bind"],
)  # fmt: skip
def test_impossible_scheme_combinations_are_usage_errors(
    pki: Pki, args: list[str], message: str
) -> None:
    values = {"port": free_port(), "cert": pki.server.cert, "key": pki.server.key}
    done = run_cli(
        "run", "tests.server.tls_app:plain", *(arg.format(**values) for arg in args),
        env=server_env(pki),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith(f"error: {message.format(**values)}")


# -- the plan and the redirect app, without sockets --------------------------------------------


def test_bind_plan_strips_schemes_and_knows_the_plain_addresses() -> None:
    plan = BindPlan.parse(
        ["https://127.0.0.1:8443", "HTTP://127.0.0.1:8080", "127.0.0.1:9443"], tls=True
    )
    assert plan.binds == ("127.0.0.1:8443", "127.0.0.1:8080", "127.0.0.1:9443")
    assert plan.plain == ("127.0.0.1:8080",)
    assert plan.is_plain(("127.0.0.1", 8080))
    assert not plan.is_plain(("127.0.0.1", 8443))
    # Without TLS every bind is plain already; the prefix is only stripped.
    assert BindPlan.parse(["http://127.0.0.1:8080"], tls=False).plain == ()


def test_bind_plan_refuses_port_zero_binds_it_could_not_tell_apart() -> None:
    with pytest.raises(SchemeError, match="need ports"):
        BindPlan.parse(["https://127.0.0.1:0", "http://127.0.0.1:0"], tls=True)


@pytest.mark.parametrize(
    ("host", "location"),
    [
        ("example.com:8080", "https://example.com:8443/a/b?c=d"),
        ("example.com", "https://example.com:8443/a/b?c=d"),
        ("[::1]:8080", "https://[::1]:8443/a/b?c=d"),
        ("evil.example/steal", None),
        ("a@b", None),
    ],
)
def test_redirect_keeps_host_and_target_and_refuses_odd_hosts(
    host: str, location: str | None
) -> None:
    from socketify import Server
    from socketify.testing import TestClient

    client = TestClient(redirect_app(Server(), 8443))
    res = client.get("/a/b?c=d", headers={"Host": host})
    if location is None:
        assert res.status == 400
    else:
        assert (res.status, res.headers["location"]) == (308, location)
