"""HTTP/1.1 status lines, ready-made; the phrases are HTTP's (`socketify.protocol.http.status`)."""

from __future__ import annotations

from socketify.protocol.http.status import NO_BODY_STATUSES, REASONS, reason

__all__ = ["NO_BODY_STATUSES", "STATUS_LINES", "reason", "status_line"]

# PERF: the serializer looks the whole first line up in one dict access.
STATUS_LINES = {code: f"HTTP/1.1 {code} {text}\r\n" for code, text in REASONS.items()}


def status_line(code: int) -> str:
    """Return `HTTP/1.1 <code> <reason>` followed by CRLF."""
    line = STATUS_LINES.get(code)
    if line is None:
        line = f"HTTP/1.1 {code} {reason(code)}\r\n"
    return line
