"""HTTPS as real clients see it: the stdlib `ssl`/http.client, requests, curl and
`openssl s_client` against `socketify run --workers 2` — versions, ALPN and SNI."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
import subprocess
import time

import pytest
import requests

from tests.server.tls_clients import client_context, common_name, https_get
from tests.support.pki import SNI_HOST, Pki
from tests.support.raw_client import connect
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(60)

needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl CLI")


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    """Run curl quietly (errors on stderr) with a 10 s cap."""
    return subprocess.run(
        ["curl", "-sS", "--max-time", "10", *args], capture_output=True, text=True, timeout=15
    )


# -- requests and bodies --------------------------------------------------------------------


def test_get_and_post_over_http_client_see_https_scheme(
    https_server: ServerProcess, pki: Pki
) -> None:
    host, port = https_server.tcp
    conn = http.client.HTTPSConnection(host, port, context=client_context(pki), timeout=5)
    try:
        conn.request("GET", "/whoami")
        res = conn.getresponse()
        assert res.status == 200
        assert json.loads(res.read()) | {"pid": 0} == {"scheme": "https", "client": None, "pid": 0}
        payload = bytes(range(256)) * 4096  # 1 MiB: many TLS records, many reads
        conn.request("POST", "/echo", body=payload)
        res = conn.getresponse()
        assert (res.status, res.getheader("X-Scheme")) == (200, "https")
        assert res.read() == payload
    finally:
        conn.close()


def test_requests_verifies_the_chain_against_the_test_ca(
    https_server: ServerProcess, pki: Pki
) -> None:
    host, port = https_server.tcp
    res = requests.post(f"https://{host}:{port}/echo", data=b"hello", verify=pki.ca, timeout=5)
    assert (res.status_code, res.content) == (200, b"hello")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"https://{host}:{port}/ping", timeout=5)  # not a public CA


@needs_curl
def test_curl_get_and_post(https_server: ServerProcess, pki: Pki) -> None:
    host, port = https_server.tcp
    got = curl("--cacert", pki.ca, f"https://{host}:{port}/ping")
    assert (got.returncode, got.stdout) == (0, "pong"), got.stderr
    posted = curl("--cacert", pki.ca, "--data-binary", "x" * 70_000, f"https://{host}:{port}/echo")
    assert (posted.returncode, posted.stdout) == (0, "x" * 70_000), posted.stderr


# -- protocol versions ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2])
def test_default_server_speaks_tls_1_3_and_1_2(
    https_server: ServerProcess, pki: Pki, version: ssl.TLSVersion
) -> None:
    with connect(https_server.address, tls=client_context(pki, version=version)) as sock:
        assert sock.version() == version.name.replace("_", ".")
    assert https_get(https_server, client_context(pki, version=version)) == b"pong"


def test_min_version_tls_1_3_refuses_a_tls_1_2_only_client_and_keeps_serving(
    modern_server: ServerProcess, pki: Pki
) -> None:
    with pytest.raises(ssl.SSLError):
        connect(modern_server.address, tls=client_context(pki, version=ssl.TLSVersion.TLSv1_2))
    with connect(modern_server.address, tls=client_context(pki)) as sock:
        assert sock.version() == "TLSv1.3"
    assert https_get(modern_server, client_context(pki)) == b"pong"


# -- ALPN and SNI ---------------------------------------------------------------------------


@needs_openssl
def test_openssl_s_client_sees_alpn_h2(https_server: ServerProcess, pki: Pki) -> None:
    host, port = https_server.tcp
    done = subprocess.run(
        ["openssl", "s_client", "-connect", f"{host}:{port}", "-alpn", "h2,http/1.1",
         "-CAfile", pki.ca, "-verify_return_error"],
        input="", capture_output=True, text=True, timeout=15,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert "ALPN protocol: h2" in output, output
    assert "Verify return code: 0 (ok)" in output, output


@pytest.mark.parametrize(
    ("offered", "chosen"), [(["h2", "http/1.1"], "h2"), (["http/1.1"], "http/1.1")]
)
def test_alpn_chooses_h2_only_for_a_client_that_offers_it(
    https_server: ServerProcess, pki: Pki, offered: list[str], chosen: str
) -> None:
    context = client_context(pki)
    context.set_alpn_protocols(offered)
    with connect(https_server.address, tls=context) as sock:
        assert sock.selected_alpn_protocol() == chosen


def test_sni_name_selects_the_second_certificate(https_server: ServerProcess, pki: Pki) -> None:
    with connect(https_server.address, tls=client_context(pki), server_hostname=SNI_HOST) as sock:
        cert = sock.getpeercert()
        assert cert is not None
        assert common_name(cert) == SNI_HOST
        sock.sendall(
            f"GET /ping HTTP/1.1\r\nHost: {SNI_HOST}\r\nConnection: close\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
    # Any other name (or none, for an IP address) gets the default certificate.
    for name in ("localhost", "127.0.0.1"):
        with connect(https_server.address, tls=client_context(pki), server_hostname=name) as sock:
            cert = sock.getpeercert()
            assert cert is not None
            assert common_name(cert) == "localhost"


@needs_curl
def test_curl_with_the_sni_name_verifies_the_second_certificate(
    https_server: ServerProcess, pki: Pki
) -> None:
    host, port = https_server.tcp
    done = curl("-v", "--cacert", pki.ca, "--resolve", f"{SNI_HOST}:{port}:{host}",
                f"https://{SNI_HOST}:{port}/ping")  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "pong"), done.stderr
    assert f"CN={SNI_HOST}" in done.stderr
    assert "ALPN: server accepted h2" in done.stderr


@needs_openssl
def test_tls_1_3_key_updates_requested_by_the_client_are_answered(
    https_server: ServerProcess, pki: Pki
) -> None:
    # `K` on s_client's input sends KeyUpdate(update_requested): the server must answer with
    # its own KeyUpdate, then keep serving on the new keys.
    host, port = https_server.tcp
    client = subprocess.Popen(
        ["openssl", "s_client", "-connect", f"{host}:{port}", "-tls1_3", "-CAfile", pki.ca,
         "-msg"],  # no -ign_eof: it would also turn the K command off
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert client.stdin is not None
    for target in ("/ping", "/whoami"):
        time.sleep(0.3)  # s_client acts on one input line at a time
        client.stdin.write("K\n")
        client.stdin.flush()
        time.sleep(0.3)
        client.stdin.write(f"GET {target} HTTP/1.1\r\nHost: test\r\n\r\n")
        client.stdin.flush()
    time.sleep(0.5)
    output = client.communicate(timeout=10)[0]  # closes its input: s_client quits
    assert output.count("<<< TLS 1.3, Handshake [length 0005], KeyUpdate") == 2, output
    assert "pong" in output
    assert '"scheme":"https"' in output
