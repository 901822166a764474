"""WebSocket (RFC 6455) with permessage-deflate (RFC 7692), server side, sans-IO.

Bytes in, events out; frames out as bytes. Imports only the stdlib (and the shared sentinels
of `socketify.protocol.http11`). Modules, one concept each:

- `handshake`: check the upgrade request, pick subprotocol and compression, the 101 headers;
- `frames`: opcodes, close codes, `frame_bytes` (encode once, write to many), unmasking;
- `reader`: client frames → messages, enforcing every framing rule;
- `deflate`: extension offers, negotiation, per-message (de)compression;
- `connection`: the close-handshake state machine and the send side.

    outcome = server_handshake(req.method, req.version, req.headers, subprotocols=["chat"])
    if isinstance(outcome, UpgradeRefused):
        ...                                           # answer outcome.status + headers
    conn = Connection(max_message_bytes=1 << 20, deflate=outcome.deflate)
    conn.feed(sock.recv(65536))                       # b"" when the peer closed TCP
    for event in conn.events():                       # stops at NEED_DATA and after Close
        handle(event)                                 # TextMessage, Ping, Close, ...
    sock.sendall(conn.data_to_send())                 # auto-pongs, close replies
    sock.sendall(conn.send_text("hello"))             # any greenlet may send
    hub_frame = frame_bytes(Opcode.TEXT, b"news")     # encode once, send_raw() to each member
"""

from __future__ import annotations

from socketify.protocol.websocket.connection import TRANSITIONS, Connection, State, Trigger
from socketify.protocol.websocket.deflate import (
    DeflateOptions,
    DeflateParams,
    negotiate_deflate,
    parse_extensions,
)
from socketify.protocol.websocket.events import (
    CLOSED,
    NEED_DATA,
    BinaryFragment,
    BinaryMessage,
    Close,
    Event,
    LocalProtocolError,
    Ping,
    Pong,
    TextFragment,
    TextMessage,
)
from socketify.protocol.websocket.frames import (
    CloseCode,
    Opcode,
    close_payload,
    frame_bytes,
    is_valid_close_code,
    unmask,
)
from socketify.protocol.websocket.handshake import (
    GUID,
    UpgradeAccepted,
    UpgradeRefused,
    accept_key,
    server_handshake,
)

__all__ = [
    "CLOSED",
    "GUID",
    "NEED_DATA",
    "TRANSITIONS",
    "BinaryFragment",
    "BinaryMessage",
    "Close",
    "CloseCode",
    "Connection",
    "DeflateOptions",
    "DeflateParams",
    "Event",
    "LocalProtocolError",
    "Opcode",
    "Ping",
    "Pong",
    "State",
    "TextFragment",
    "TextMessage",
    "Trigger",
    "UpgradeAccepted",
    "UpgradeRefused",
    "accept_key",
    "close_payload",
    "frame_bytes",
    "is_valid_close_code",
    "negotiate_deflate",
    "parse_extensions",
    "server_handshake",
    "unmask",
]
