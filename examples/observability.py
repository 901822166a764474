"""Metrics, health probes and traces of a small shop, across workers.

    socketify run examples.observability:server --workers 2 --metrics-bind 127.0.0.1:9100
    curl -X POST localhost:8080/orders/gift         # 201, counted in shop_orders_total
    curl localhost:9100/metrics                     # every worker's counts, summed
    curl localhost:9100/readyz                      # 200 while workers accept, 503 draining

The routes are counted by pattern (`/orders/:kind`, never one series per kind of URL); the
shop's own counter, gauge and histogram are declared once at module level and summed across
workers by the master just like socketify's. With the `otel` extra installed and
`OTEL_TRACES_EXPORTER=otlp` (or `console`) in the environment, every request is a span too.

Guide: docs/guide/observability.md.
"""

from __future__ import annotations

import time

from socketify import Request, Response, Server, metrics
from socketify.realtime import sse
from socketify.realtime.pulse.channel import Channel

KINDS = ("book", "gift", "ticket")

orders = metrics.Counter("shop_orders_total", "Orders placed, by kind", labels=("kind",))
open_carts = metrics.Gauge("shop_open_carts", "Carts opened and not yet checked out")
checkout_seconds = metrics.Histogram(
    "shop_checkout_seconds", "Time spent checking out", buckets=(0.001, 0.01, 0.1, 1.0)
)

server = Server(metrics_buckets=(0.001, 0.005, 0.025, 0.1, 0.5, 2.5))


@server.get("/ping")
def ping(req: Request, res: Response) -> None:
    res.send("pong")


@server.post("/orders/:kind")
def order(req: Request, res: Response) -> None:
    kind = req.params["kind"]
    if kind not in KINDS:
        res.status(404).send(f"no such kind: {kind}\n")
        return
    started = time.perf_counter()
    open_carts.inc()
    orders.inc(kind=kind)
    open_carts.dec()
    checkout_seconds.observe(time.perf_counter() - started)
    res.status(201).json({"kind": kind})


def echo(channel: Channel, message: str | bytes, is_binary: bool) -> None:
    if isinstance(message, str):
        channel.send_text(message)
    else:
        channel.send_binary(message)


server.ws("/echo", message=echo)


@server.get("/ticks")
def ticks(req: Request, res: Response) -> None:
    stream = sse.upgrade(req, res)
    if stream.alive:
        stream.send_event("tick", "1")
