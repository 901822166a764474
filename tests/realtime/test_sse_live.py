"""SSE against `socketify run --workers 2`: incremental delivery, framing, HEAD, hub fan-out."""

from __future__ import annotations

import requests

from tests.realtime.realtime_client import SseClient
from tests.support.serve import ServerProcess


def _subscribers_on_both_workers(live: ServerProcess, target: str) -> dict[str, list[SseClient]]:
    """Open subscriptions until each of the two workers holds at least one."""
    by_pid: dict[str, list[SseClient]] = {}
    for _ in range(40):
        client = SseClient(live.port, target)
        hello = client.next_data_event()
        assert hello.event == "hello"
        by_pid.setdefault(hello.data[0], []).append(client)
        if len(by_pid) == 2:
            return by_pid
    raise AssertionError(f"all 40 subscriptions landed on {list(by_pid)}")


def test_sse_headers_and_events_arrive_before_the_stream_ends(live: ServerProcess) -> None:
    client = SseClient(live.port, "/events", headers="Last-Event-ID: 41\r\n")
    try:
        assert client.head.startswith("HTTP/1.1 200 ")
        assert "Content-Type: text/event-stream; charset=utf-8" in client.head
        assert "Cache-Control: no-cache" in client.head
        assert "Connection: close" in client.head
        assert "Content-Length" not in client.head
        assert client.next_event().retry == "1500"
        hello = client.next_event()
        assert (hello.event, hello.id) == ("hello", "41")  # Last-Event-ID reached the handler
    finally:
        client.close()


def test_sse_multiline_data_is_split_on_every_line_ending_and_heartbeats_flow(
    live: ServerProcess,
) -> None:
    client = SseClient(live.port, "/events/multi")
    try:
        assert client.next_event().data == ["a", "b", "c", "d"]
        assert client.next_event().comments == ["note"]
        assert client.next_event().comments == ["heartbeat"]  # every 0.2 s
        assert client.next_event().comments == ["heartbeat"]
    finally:
        client.close()


def test_sse_head_request_gets_headers_only_then_close(live: ServerProcess) -> None:
    client = SseClient(live.port, "/events", method="HEAD")
    try:
        assert "Content-Type: text/event-stream" in client.head
        assert client.at_eof()
        assert client.buf == b""
    finally:
        client.close()


def test_sse_broadcast_reaches_subscribers_on_both_workers_once_each(live: ServerProcess) -> None:
    by_pid = _subscribers_on_both_workers(live, "/events")
    clients = [c for group in by_pid.values() for c in group]
    try:
        # One keep-alive connection, so one worker publishes: the bus keeps each publisher's
        # order, not an order across publishers on different workers.
        with requests.Session() as publisher:
            for n in range(3):
                posted = publisher.post(
                    f"{live.url}/publish?id={n}", data=f"line 1\nline {n}", timeout=5
                )
                assert posted.status_code == 200
        for client in clients:
            for n in range(3):
                event = client.next_data_event()
                assert (event.event, event.id, event.data) == (
                    "news",
                    str(n),
                    ["line 1", f"line {n}"],
                )
    finally:
        for client in clients:
            client.close()


def test_sse_publish_after_subscribers_left_still_serves(live: ServerProcess) -> None:
    client = SseClient(live.port, "/events")
    client.next_data_event()
    client.close()  # the server notices the EOF and drops the member
    for _ in range(3):
        assert requests.post(f"{live.url}/publish", data="after", timeout=5).status_code == 200
    fresh = SseClient(live.port, "/events")
    try:
        assert fresh.next_data_event().event == "hello"
    finally:
        fresh.close()
