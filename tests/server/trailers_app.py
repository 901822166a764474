"""The app the trailer and body-timeout tests run, over HTTP/1.1 and h2c alike.

`body_timeout` is short (1 s) so a trickled body runs out of it quickly; each wait for the
next piece is shorter than that, so only a deadline for the whole body catches it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from socketify import Request, Response, Server

BODY_TIMEOUT = 1.0


def echo(req: Request, res: Response) -> None:
    """The body's size and the trailers that came after it."""
    size = len(req.body)
    res.json({"size": size, "trailers": dict(req.trailers)})


def streamed_echo(req: Request, res: Response) -> None:
    """The body read piece by piece; the trailers are asked for before its end, then after."""
    pieces = req.iter_body()
    first = next(pieces, b"")
    try:
        early = dict(req.trailers)
    except RuntimeError as exc:
        early = {"error": str(exc)}
    size = len(first) + sum(len(piece) for piece in pieces)
    res.json({"size": size, "early": early, "trailers": dict(req.trailers)})


def digest_stream(req: Request, res: Response) -> None:
    """A streamed answer: one trailer announced up front, a digest of the body at its end."""
    count = int(req.query.get("n", "3"))
    hasher = hashlib.sha256()

    def produce() -> Iterator[bytes]:
        for n in range(count):
            chunk = f"chunk {n};".encode()
            hasher.update(chunk)
            yield chunk
        res.set_trailer("X-Digest", hasher.hexdigest())

    res.set_header("Trailer", "X-Digest, X-Count")
    res.set_trailer("X-Count", str(count))
    res.stream(produce())


def buffered_with_trailer(req: Request, res: Response) -> None:
    """A trailer set before a buffered body: the answer has a Content-Length, it is dropped."""
    res.set_trailer("X-Dropped", "1")
    res.send("buffered")


def slow_reader(req: Request, res: Response) -> None:
    """Reads the whole body; a client trickling it too slowly gets a 408."""
    res.send(f"{len(req.body)}")


def ping(req: Request, res: Response) -> None:
    res.send("pong")


server = Server(body_timeout=BODY_TIMEOUT, idle_timeout=10.0, graceful_timeout=3.0)
server.post("/echo", echo)
server.post("/streamed-echo", streamed_echo)
server.get("/digest-stream", digest_stream)
server.get("/buffered", buffered_with_trailer)
server.post("/slow", slow_reader)
server.get("/ping", ping)


def echo_stream(req: Request, res: Response) -> None:
    """The body streamed back as it arrives: the answer starts before the body has ended."""
    res.stream(req.iter_body())


server.post("/echo-stream", echo_stream)
