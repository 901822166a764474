"""Request targets (RFC 9112 §3.2), sans-IO: what a request is routed by, and for whom.

`split_target` takes a validated target (visible ASCII, within the size limit) in any of the
four forms: origin (`/a?b`), absolute (`http://host/a?b`), authority (`host:443`, CONNECT
only) and asterisk (`*`, OPTIONS only). It returns the still percent-encoded path and the
query a request is routed by, and for the absolute form its authority, which replaces the
Host header (`with_host`): the target's own authority is the one the client meant.
"""

from __future__ import annotations

import ipaddress
import re

from socketify.protocol.http11.events import ParseError

__all__ = ["is_authority", "split_target", "with_host"]

_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/?#]*)")
# RFC 3986 authority without userinfo: a host and an optional port. The host is a reg-name
# (which covers IPv4 too: unreserved characters, sub-delims and %XX escapes) or an IP literal
# in brackets. Userinfo is refused: RFC 9110 calls it an error in an http(s) URI, and an "@"
# is how `evil.example/x?@good.example` means one host to one parser and another to the next.
_AUTHORITY = re.compile(
    r"(?:(?P<reg>(?:[0-9A-Za-z\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+)"
    r"|\[(?P<ip6>[0-9A-Fa-f:.]+)\]|\[v[0-9A-Fa-f]+\.[0-9A-Za-z\-._~!$&'()*+,;=:]+\])"
    r"(?::[0-9]{0,5})?"
)


def is_authority(text: str) -> bool:
    """Whether `text` is a valid `host[:port]` authority (a Host header, `:authority`).

    The empty text is valid too: a client sends an empty Host when its target has none.
    """
    if not text:
        return True
    match = _AUTHORITY.fullmatch(text)
    if match is None:
        return False
    literal = match["ip6"]
    if literal is not None:
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            return False
    return True


def split_target(method: str, target: str) -> tuple[str, str, str]:
    """(path, query, authority) of `target`; the authority only for the absolute form.

    Raises ParseError(400) for a target the method may not use or that is malformed.
    """
    authority = ""
    if target[0] == "/":
        uri = target
    elif target == "*":
        if method != "OPTIONS":
            raise ParseError(400, "Asterisk-form target is only for OPTIONS")
        return "*", "", ""
    elif method == "CONNECT":
        return target, "", ""  # authority-form; no route serves it
    else:
        # Absolute-form: routed by its path, like an origin server behind a proxy.
        scheme_host = _ABSOLUTE.match(target)
        if scheme_host is None:
            raise ParseError(400, "Malformed request target")
        authority = scheme_host[1]
        if not authority or not is_authority(authority):
            raise ParseError(400, "Malformed authority in request target")
        uri = target[scheme_host.end() :] or "/"
        if uri[0] != "/":
            uri = "/" + uri
    uri = uri.partition("#")[0]
    path, _, query = uri.partition("?")
    return path, query, authority


def with_host(block: str, authority: str) -> str:
    """The header lines `block` (joined by CRLF) with Host set to `authority`, in place."""
    lines = block.split("\r\n") if block else []
    host = "Host: " + authority
    for index, line in enumerate(lines):
        if line[:5].lower() == "host:":
            lines[index] = host
            break
    else:
        lines.append(host)  # HTTP/1.0 may omit Host
    return "\r\n".join(lines)
