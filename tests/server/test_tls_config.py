"""Configuring TLS: `TlsOptions` validation and `from_env`, one-line start-up errors from
`socketify run` for unusable certificates, and where the server's TLS settings come from
(command line > the app's own `tls` > SOCKETIFY_CERT_FILE/SOCKETIFY_KEY_FILE)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from socketify.core.tls_options import TlsError, TlsOptions
from tests.server.tls_clients import client_context, common_name, https_get, server_env, start
from tests.support.pki import SNI_HOST, Pki, make_pki
from tests.support.ports import free_port
from tests.support.raw_client import connect
from tests.support.serve import Launcher, run_cli

pytestmark = pytest.mark.timeout(60)


# -- TlsOptions -----------------------------------------------------------------------------


def test_from_env_needs_both_variables() -> None:
    both = {"SOCKETIFY_CERT_FILE": "c.pem", "SOCKETIFY_KEY_FILE": "k.pem"}
    assert TlsOptions.from_env(both) == TlsOptions(cert_file="c.pem", key_file="k.pem")
    assert TlsOptions.from_env({"SOCKETIFY_CERT_FILE": "c.pem"}) is None
    assert TlsOptions.from_env({**both, "SOCKETIFY_KEY_FILE": ""}) is None
    assert TlsOptions.from_env({}) is None


def encrypted_copy(pki: Pki, directory: Path, passphrase: bytes) -> str:
    """The server's key, written again encrypted with `passphrase`."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(Path(pki.server.key).read_bytes(), None)
    path = directory / "encrypted.key"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(passphrase),
        )
    )
    return str(path)


def test_an_encrypted_key_opens_with_its_passphrase_and_is_refused_without(
    tmp_path: Path,
) -> None:
    pki = make_pki(tmp_path)
    key = encrypted_copy(pki, tmp_path, b"1234")
    TlsOptions(cert_file=pki.server.cert, key_file=key, key_password="1234").build_context()
    with pytest.raises(TlsError, match="encrypted: give its passphrase"):
        TlsOptions(cert_file=pki.server.cert, key_file=key).build_context()
    with pytest.raises(TlsError, match="cannot load"):
        TlsOptions(cert_file=pki.server.cert, key_file=key, key_password="wrong").build_context()
    assert "1234" not in repr(TlsOptions(cert_file="c", key_file="k", key_password="1234"))


def test_from_env_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOCKETIFY_CERT_FILE", "/etc/c.pem")
    monkeypatch.setenv("SOCKETIFY_KEY_FILE", "/etc/k.pem")
    options = TlsOptions.from_env()
    assert options is not None
    assert (options.cert_file, options.key_file, options.min_version) == (
        "/etc/c.pem",
        "/etc/k.pem",
        "TLSv1.2",
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_version": "TLSv1.1"}, "min_version"),
        ({"client_auth": "sometimes"}, "client_auth"),
        ({"client_auth": "required"}, "ca_file"),
    ],
)
def test_invalid_options_are_refused_when_built(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(TlsError, match=message):
        TlsOptions(cert_file="c", key_file="k", **kwargs)  # type: ignore[arg-type]


def test_build_context_errors_name_the_file_at_fault(pki: Pki) -> None:
    def error(**kwargs: object) -> str:
        options = {"cert_file": pki.server.cert, "key_file": pki.server.key, **kwargs}
        with pytest.raises(TlsError) as raised:
            TlsOptions(**options).build_context()  # type: ignore[arg-type]
        return str(raised.value)

    assert error(cert_file="/missing.crt") == "TLS certificate file not found: /missing.crt"
    assert error(key_file="/missing.key") == "TLS key file not found: /missing.key"
    assert "KEY_VALUES_MISMATCH" in error(key_file=pki.stray_key)
    assert "/missing-ca.crt" in error(ca_file="/missing-ca.crt", client_auth="optional")
    assert "invalid cipher list" in error(ciphers="NO-SUCH-CIPHER")
    assert "/missing-sni.crt" in error(sni={SNI_HOST: ("/missing-sni.crt", pki.sni.key)})


def test_context_carries_the_policy(pki: Pki) -> None:
    import ssl

    context = TlsOptions(
        cert_file=pki.server.cert,
        key_file=pki.server.key,
        min_version="TLSv1.3",
        ca_file=pki.ca,
        client_auth="optional",
    ).build_context()
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert context.options & ssl.OP_NO_COMPRESSION


# -- socketify run: start-up errors ----------------------------------------------------------


def run_failing(
    pki: Pki, app: str, args: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`socketify run APP ARGS` to completion (it is expected to fail)."""
    bind = f"127.0.0.1:{free_port()}"
    return run_cli("run", app, *args, "--bind", bind, env={**server_env(pki), **env})


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing-cert", "error: TLS certificate file not found: /no/such.crt"),
        ("key-mismatch", "error: cannot load {cert} with {stray}: [X509: KEY_VALUES_MISMATCH]"),
        ("cert-alone", "error: --certfile and --keyfile go together"),
        ("missing-ca", "error: cannot load client CA file /no/such-ca.crt"),
        ("env-missing", "error: TLS certificate file not found: /no/env.crt"),
        (
            "app-missing",
            "error: cannot load app 'tests.server.tls_app:server': TLS certificate file not found",
        ),
    ],
)
def test_unusable_certificates_stop_the_start_with_one_line_and_exit_1(
    pki: Pki, case: str, expected: str
) -> None:
    cert, key = pki.server.cert, pki.server.key
    env: dict[str, str] = {}
    args: list[str] = {
        "missing-cert": ["--certfile", "/no/such.crt", "--keyfile", key],
        "key-mismatch": ["--certfile", cert, "--keyfile", pki.stray_key],
        "cert-alone": ["--certfile", cert],
        "missing-ca": ["--certfile", cert, "--keyfile", key, "--ca-file", "/no/such-ca.crt"],
        "env-missing": [],
        "app-missing": [],
    }[case]
    if case == "env-missing":
        env = {"SOCKETIFY_CERT_FILE": "/no/env.crt", "SOCKETIFY_KEY_FILE": key}
    if case == "app-missing":
        env = {"TLS_TEST_PKI": "/no/such/dir"}
    app = "tests.server.tls_app:" + ("server" if case == "app-missing" else "plain")
    result = run_failing(pki, app, args, env)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    # One line; an app that cannot load adds a hint on what APP may be.
    assert len(lines) == (2 if case == "app-missing" else 1), result.stderr
    assert lines[0].startswith(expected.format(cert=cert, stray=pki.stray_key)), lines[0]


# -- socketify run: where the TLS settings come from -----------------------------------------


def test_environment_gives_tls_to_an_app_without_but_never_replaces_the_apps_own(
    serve: Launcher, pki: Pki
) -> None:
    env = {"SOCKETIFY_CERT_FILE": pki.server.cert, "SOCKETIFY_KEY_FILE": pki.server.key}
    plain = start(serve, pki, "plain", env=env)
    own = start(serve, pki, "server", env=env)  # the app's TlsOptions has an SNI certificate
    flags = ("--certfile", pki.server.cert, "--keyfile", pki.server.key)
    in_process = start(serve, pki, "plain", flags, workers=0)
    for server in (plain, own, in_process):
        server.wait_serving()
    assert json.loads(https_get(plain, client_context(pki), "/whoami"))["scheme"] == "https"
    assert https_get(in_process, client_context(pki)) == b"pong"
    # The app's SNI certificate still answers: the environment did not replace its options.
    with connect(own.address, tls=client_context(pki), server_hostname=SNI_HOST) as sock:
        cert = sock.getpeercert()
        assert cert is not None
        assert common_name(cert) == SNI_HOST


def test_alpn_offers_h2_only_when_the_server_speaks_http2(pki: Pki) -> None:
    options = TlsOptions(cert_file=pki.server.cert, key_file=pki.server.key)
    assert options.protocols(http2=True) == ("h2", "http/1.1")
    assert options.protocols(http2=False) == ("http/1.1",)
    chosen = TlsOptions(cert_file=pki.server.cert, key_file=pki.server.key, alpn=("h2",))
    assert chosen.protocols(http2=True) == ("h2",)
    assert chosen.protocols(http2=False) == ()
