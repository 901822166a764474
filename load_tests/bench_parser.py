"""Micro-benchmark of the sans-IO request parser (run: python load_tests/bench_parser.py)."""

from __future__ import annotations

import itertools
import time
import timeit

from socketify.protocol.http11 import END_OF_MESSAGE, RequestParser

TYPICAL_GET = (
    b"GET /ping HTTP/1.1\r\n"
    b"Host: 127.0.0.1:8080\r\n"
    b"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n"
    b"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
    b"Accept-Language: en-US,en;q=0.5\r\n"
    b"Accept-Encoding: gzip, deflate, br\r\n"
    b"Connection: keep-alive\r\n"
    b"Cache-Control: no-cache\r\n"
    b"Pragma: no-cache\r\n"
    b"Cookie: session=abc123; theme=dark\r\n"
    b"Referer: http://127.0.0.1:8080/\r\n"
    b"\r\n"
)
WRK_GET = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
CHUNKED_POST = (
    b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"10\r\n0123456789abcdef\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n"
)


def per_request_us(raws: list[bytes], rounds: int = 5, number: int = 20000) -> float:
    """Best-of-rounds µs (of CPU time) to parse one request through to END_OF_MESSAGE on a
    kept parser, taking the requests of `raws` in turn."""
    parser = RequestParser()
    requests = itertools.cycle(raws)

    def parse_one() -> None:
        parser.feed(next(requests))
        while parser.next_event() is not END_OF_MESSAGE:
            pass

    # CPU time, not wall time: the figure should not move with the machine's other load.
    timings = timeit.repeat(parse_one, repeat=rounds, number=number, timer=time.process_time)
    return min(timings) / number * 1e6


def main() -> None:
    # Heads the parser has not met yet (a new cookie each time) take the full checks; the
    # ones above are remembered after the first time.
    unseen = [TYPICAL_GET.replace(b"abc123", b"%06d" % n) for n in range(100_000)]
    for name, raws in (
        ("10-header GET", [TYPICAL_GET]),
        ("10-header GET, unseen", unseen),
        ("wrk GET (1 header)", [WRK_GET]),
        ("chunked POST, 2 chunks", [CHUNKED_POST]),
    ):
        print(f"{name:26s} {per_request_us(raws):6.2f} µs/request  ({len(raws[0])} bytes)")


if __name__ == "__main__":
    main()
