"""The opening handshake (RFC 6455 §4.2): checks, refusals, subprotocols, compression."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from socketify.core.headers import Headers
from socketify.protocol.websocket import (
    DeflateOptions,
    UpgradeAccepted,
    UpgradeRefused,
    accept_key,
    server_handshake,
)

KEY = "dGhlIHNhbXBsZSBub25jZQ=="
ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
UPGRADE = [
    ("Host", "server.example.com"),
    ("Upgrade", "websocket"),
    ("Connection", "Upgrade"),
    ("Sec-WebSocket-Key", KEY),
    ("Sec-WebSocket-Version", "13"),
]


def request(
    *changes: tuple[str, str | None],
    method: str = "GET",
    version: str = "HTTP/1.1",
    **kw: Any,
) -> UpgradeAccepted | UpgradeRefused:
    """Handshake a copy of UPGRADE with fields replaced (value None drops the field).

    A name starting with "+" adds a repeated field instead of replacing.
    """
    headers: dict[str, str] = dict(UPGRADE)
    extra: list[tuple[str, str]] = []
    for name, value in changes:
        if name.startswith("+") and value is not None:
            extra.append((name[1:], value))
        elif value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return server_handshake(method, version, [*headers.items(), *extra], **kw)


def refused(*changes: tuple[str, str | None], **kw: Any) -> UpgradeRefused:
    outcome = request(*changes, **kw)
    assert isinstance(outcome, UpgradeRefused), outcome
    return outcome


def accepted(*changes: tuple[str, str | None], **kw: Any) -> UpgradeAccepted:
    outcome = request(*changes, **kw)
    assert isinstance(outcome, UpgradeAccepted), outcome
    return outcome


def test_rfc_6455_accept_key_example() -> None:
    assert accept_key(KEY) == ACCEPT


def test_a_valid_upgrade_gets_the_101_headers() -> None:
    outcome = accepted()
    assert outcome.status == 101
    assert outcome.headers == (
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", ACCEPT),
    )
    assert outcome.subprotocol is None and outcome.deflate is None


def test_headers_may_be_a_mapping_and_values_are_case_insensitive() -> None:
    headers = Headers(
        [
            ("upgrade", "WebSocket"),
            ("connection", "keep-alive, UPGRADE"),
            ("sec-websocket-key", KEY),
            ("sec-websocket-version", "13"),
        ]
    )
    assert isinstance(server_handshake("GET", "HTTP/1.1", headers), UpgradeAccepted)
    assert isinstance(server_handshake("GET", "HTTP/1.1", dict(UPGRADE)), UpgradeAccepted)


@pytest.mark.parametrize(
    ("kw", "changes"),
    [
        ({"method": "POST"}, ()),
        ({"method": "get"}, ()),
        ({"version": "HTTP/1.0"}, ()),
        ({}, (("Connection", "keep-alive"),)),
        ({}, (("Connection", None),)),
        ({}, (("Sec-WebSocket-Key", None),)),
        ({}, (("Sec-WebSocket-Key", ""),)),
        ({}, (("Sec-WebSocket-Key", "not base64 at all!!!!!!!"),)),
        ({}, (("Sec-WebSocket-Key", base64.b64encode(bytes(15)).decode()),)),
        ({}, (("Sec-WebSocket-Key", base64.b64encode(bytes(17)).decode()),)),
        ({}, (("+Sec-WebSocket-Key", KEY),)),  # twice
    ],
)
def test_bad_upgrades_get_400(kw: dict, changes: tuple) -> None:
    outcome = refused(*changes, **kw)
    assert outcome.status == 400 and outcome.detail


@pytest.mark.parametrize(
    "changes",
    [
        (("Upgrade", None), ("Connection", None), ("Sec-WebSocket-Key", None)),  # a plain GET
        (("Upgrade", None),),
        (("Upgrade", "h2c"),),
    ],
)
def test_a_request_without_a_websocket_upgrade_gets_426(changes: tuple) -> None:
    outcome = refused(*changes)
    assert outcome.status == 426
    assert ("Sec-WebSocket-Version", "13") in outcome.headers
    assert ("Upgrade", "websocket") in outcome.headers


@pytest.mark.parametrize("version", [None, "8", "12", "14", "13, 8", " "])
def test_a_bad_or_missing_version_gets_426_naming_13(version: str | None) -> None:
    outcome = refused(("Sec-WebSocket-Version", version))
    assert outcome.status == 426
    assert outcome.headers == (("Sec-WebSocket-Version", "13"),)


# -- origins -----------------------------------------------------------------------------------

ORIGINS = ["https://app.example.com", "http://localhost:8080/"]


@pytest.mark.parametrize("origin", ["https://app.example.com", "HTTPS://APP.example.com", None])
def test_allowed_or_absent_origins_pass(origin: str | None) -> None:
    accepted(("Origin", origin), origins=ORIGINS)
    accepted(("Origin", "http://localhost:8080"), origins=ORIGINS)


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "https://app.example.com.evil"])
def test_other_origins_get_403(origin: str) -> None:
    assert refused(("Origin", origin), origins=ORIGINS).status == 403


def test_two_origin_fields_get_403() -> None:
    changes = (("Origin", ORIGINS[0]), ("+Origin", ORIGINS[0]))
    assert refused(*changes, origins=ORIGINS).status == 403


def test_an_origin_predicate_sees_the_value() -> None:
    seen: list = []

    def policy(origin: str | None) -> bool:
        seen.append(origin)
        return origin is not None and origin.endswith(".example.com")

    accepted(("Origin", "https://a.example.com"), origins=policy)
    assert refused(("Origin", None), origins=policy).status == 403
    assert seen == ["https://a.example.com", None]


def test_no_origin_check_by_default() -> None:
    accepted(("Origin", "https://evil.example"))


def test_origin_is_checked_after_the_request_is_valid() -> None:
    outcome = refused(
        ("Origin", "https://evil.example"), ("Sec-WebSocket-Version", "8"), origins=[]
    )
    assert outcome.status == 426


# -- subprotocols ------------------------------------------------------------------------------


def test_the_first_supported_subprotocol_in_the_clients_order_is_chosen() -> None:
    outcome = accepted(
        ("Sec-WebSocket-Protocol", "mqtt, Chat, superchat"), subprotocols=["superchat", "chat"]
    )
    assert outcome.subprotocol == "chat"  # the server's spelling, for the application
    assert ("Sec-WebSocket-Protocol", "Chat") in outcome.headers  # the client's, for the client


def test_subprotocols_across_repeated_fields() -> None:
    changes = (("Sec-WebSocket-Protocol", "a"), ("+Sec-WebSocket-Protocol", "b, c"))
    assert accepted(*changes, subprotocols=["c"]).subprotocol == "c"


def test_no_common_subprotocol_means_no_header() -> None:
    outcome = accepted(("Sec-WebSocket-Protocol", "x, y"), subprotocols=["z"])
    assert outcome.subprotocol is None
    assert all(name != "Sec-WebSocket-Protocol" for name, _ in outcome.headers)
    assert accepted(subprotocols=["z"]).subprotocol is None


# -- permessage-deflate ------------------------------------------------------------------------

OFFER = ("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")


def test_deflate_is_negotiated_only_when_configured() -> None:
    assert accepted(OFFER).deflate is None
    outcome = accepted(OFFER, deflate=DeflateOptions())
    assert outcome.deflate is not None
    assert ("Sec-WebSocket-Extensions", "permessage-deflate") in outcome.headers


def test_a_malformed_extension_offer_still_upgrades_without_compression() -> None:
    outcome = accepted(
        ("Sec-WebSocket-Extensions", 'permessage-deflate; x="'), deflate=DeflateOptions()
    )
    assert outcome.deflate is None
    assert all(name != "Sec-WebSocket-Extensions" for name, _ in outcome.headers)


def test_offers_across_repeated_extension_fields() -> None:
    changes = (
        ("Sec-WebSocket-Extensions", "permessage-deflate; bogus"),
        ("+Sec-WebSocket-Extensions", "permessage-deflate; server_no_context_takeover"),
    )
    outcome = accepted(*changes, deflate=DeflateOptions())
    assert outcome.deflate is not None and outcome.deflate.server_no_context_takeover
