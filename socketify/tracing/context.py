"""Whether this process traces, and the current span's ids: what other modules ask of tracing.

The access log and `socketify.http_client` call these on every request or call; until a
worker turns tracing on (`socketify.tracing.setup`), they return at once and OpenTelemetry is
never imported, so tracing costs nothing where it is off or not installed.
"""

from __future__ import annotations

from collections.abc import MutableMapping

__all__ = ["current_ids", "enable", "enabled", "inject"]


class _Switch:
    """Set once, at worker boot, when tracing starts."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


_switch = _Switch()


def enable() -> None:
    """Tracing is on in this process from now on."""
    _switch.on = True


def enabled() -> bool:
    """Whether this process traces requests."""
    return _switch.on


def current_ids() -> tuple[str, str] | None:
    """`(trace_id, span_id)` in hex of the span being recorded now; None without one."""
    if not _switch.on:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current trace context (W3C `traceparent`...) to outgoing request headers."""
    if not _switch.on:
        return
    from opentelemetry import propagate

    propagate.inject(headers)
