"""PROXY protocol settings: the options as given, who may send the header, which binds expect it."""

from __future__ import annotations

import pytest

from socketify.core.options import ServerOptions
from socketify.server.proxy_intake import ProxyIntake


def test_options_default_to_no_proxy_protocol_and_loopback_senders() -> None:
    options = ServerOptions()
    assert options.proxy_protocol is False
    assert options.proxy_allow == ("127.0.0.0/8", "::1/128")
    assert ProxyIntake.build(options.proxy_protocol, options.proxy_allow) is None


def test_options_take_lists_and_comma_separated_text_and_keep_tuples() -> None:
    options = ServerOptions(proxy_protocol=["127.0.0.1:8001"], proxy_allow="10.0.0.0/8, ::1")
    assert options.proxy_protocol == ("127.0.0.1:8001",)
    assert options.proxy_allow == ("10.0.0.0/8", "::1/128")
    assert ServerOptions(proxy_protocol="a:1,b:2").proxy_protocol == ("a:1", "b:2")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"proxy_allow": ["10.0.0.0/33"]}, "proxy_allow: '10.0.0.0/33' is not a network"),
        ({"proxy_allow": "nowhere"}, "is not a network"),
        ({"proxy_protocol": 1}, "proxy_protocol must be True, False or a list of binds"),
        ({"proxy_protocol": [8001]}, "list of binds"),
    ],
)
def test_bad_options_say_what_is_wrong(options: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ServerOptions(**options)  # type: ignore[arg-type]


def test_allows_only_the_listed_networks_and_unix_peers() -> None:
    intake = ProxyIntake.build(True, ["10.0.0.0/8", "2001:db8::/32"])
    assert intake is not None
    assert intake.allows("10.1.2.3") and intake.allows("2001:db8::7")
    assert intake.allows("::ffff:10.0.0.9")  # an IPv4 peer on a dual-stack listener
    assert intake.allows("unix")
    assert not intake.allows("127.0.0.1") and not intake.allows("192.0.2.1")
    assert not intake.allows("not-an-address")


def test_covers_every_bind_or_only_the_listed_ones() -> None:
    everywhere = ProxyIntake.build(True, ["127.0.0.1"])
    assert everywhere is not None and everywhere.covers(("127.0.0.1", 9))
    listed = ProxyIntake.build(("127.0.0.1:8001", "unix:/tmp/app.sock"), ["127.0.0.1"])
    assert listed is not None
    assert listed.covers(("127.0.0.1", 8001)) and listed.covers("/tmp/app.sock")
    assert not listed.covers(("127.0.0.1", 8002)) and not listed.covers("/tmp/other.sock")
