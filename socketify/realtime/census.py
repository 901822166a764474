"""`RoomCensus`: how many members each room has on every worker and host, kept over the bus.

Theory of operation. `Rooms` know their own process's members; `room_size` must count
everyone's. Each process's census publishes on one bus channel (`<rooms name>#census`) what
changed here, as the new absolute count of the room, and listens to the other processes doing
the same, so a room's size is this process's count plus the counts last heard from the others:
a dict lookup and a short sum, no round trip. Absolute counts make a repeated or late message
harmless.

Every message carries its sender's id (host, pid and a random token, so a respawned worker
with a recycled pid is somebody new) and a sequence number. A process that sees a gap, or a
sender it does not know that did not start from 1, asks that sender for a snapshot; a new
process says hello and every process with members answers with its snapshot. A process
holding members beats every `beat` seconds, and one not heard from for `lease` seconds stops
counting: that is how the members of a worker killed with -9 (no goodbye possible) drop out.

The census starts in a worker on first use (or when the rooms are made there); started in a
process that then forks, it starts afresh in the child. For `settle` seconds after a start,
`total()` waits for the snapshots the hello asked for instead of answering from nothing.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

import gevent
import orjson

from workers.shared.bus import LocalBus

__all__ = ["RoomCensus"]

log = logging.getLogger("socketify.error")

BEAT_SECONDS = 1.0
LEASE_SECONDS = 4.0
SETTLE_SECONDS = 0.2
SNAPSHOT_CHUNK_BYTES = 16_000  # well under the worker bus's record limit


class _Peer:
    """What we know of another process: its counts, its last sequence number, when heard."""

    __slots__ = ("asked", "counts", "seen", "seq", "synced")

    def __init__(self, seq: int, now: float) -> None:
        self.counts: dict[str, int] = {}
        self.seq = seq
        self.seen = now
        self.synced = False
        self.asked = 0.0


class RoomCensus:
    """Per-room member counts of every process on a bus; `total(room)` is the room's size."""

    def __init__(
        self,
        channel: str,
        bus: Callable[[], Any],
        *,
        beat: float = BEAT_SECONDS,
        lease: float = LEASE_SECONDS,
    ) -> None:
        self.channel = channel
        self._bus = bus
        self.beat = beat
        self.lease = lease
        self._pid = -1
        self.me = ""
        self._seq = 0
        self._mine: dict[str, int] = {}
        self._peers: dict[str, _Peer] = {}
        self._subscription: Any = None
        self._beater: Any = None
        self._settled_at = 0.0

    # -- the rooms' side ----------------------------------------------------------------------

    def update(self, room: str, count: int) -> None:
        """This process now has `count` members in `room`; tell the others."""
        self.start()
        if count:
            self._mine[room] = count
        else:
            self._mine.pop(room, None)
        self._publish({"k": "n", "r": room, "n": count})

    def total(self, room: str) -> int:
        """Members of `room` in every process heard from within the lease."""
        self.start()
        wait = self._settled_at - time.monotonic()
        if wait > 0 and gevent.getcurrent() is not gevent.get_hub():
            gevent.sleep(wait)
        cutoff = time.monotonic() - self.lease
        count = self._mine.get(room, 0)
        for peer in self._peers.values():
            if peer.seen >= cutoff:
                count += peer.counts.get(room, 0)
        return count

    def start(self) -> None:
        """Join the census in this process (idempotent; starts afresh after a fork)."""
        pid = os.getpid()
        if self._pid == pid:
            return
        self._pid = pid
        self.me = f"{socket.gethostname()}:{pid}:{secrets.token_hex(4)}"
        self._seq = 0
        self._mine = {}
        self._peers = {}
        bus = self._bus()
        self._subscription = bus.subscribe(self.channel, self._receive)
        self._beater = gevent.spawn(self._beat_forever)
        if type(bus) is not LocalBus:  # a private bus has nobody to hear from
            self._settled_at = time.monotonic() + SETTLE_SECONDS
        self._publish({"k": "h"})

    def stop(self) -> None:
        """Leave the census: stop listening and beating (the others forget us after a lease)."""
        if self._subscription is not None:
            self._subscription.cancel()
            self._subscription = None
        if self._beater is not None:
            self._beater.kill(block=False)
            self._beater = None
        self._pid = -1

    # -- the wire -----------------------------------------------------------------------------

    def _publish(self, message: dict[str, Any]) -> None:
        self._seq += 1
        message["w"] = self.me
        message["s"] = self._seq
        try:
            self._bus().publish(self.channel, orjson.dumps(message))
        except Exception:
            # A full or broken bus must not fail a join; the others resync from our next beat.
            log.exception("room census could not publish on %r", self.channel)

    def _send_snapshot(self) -> None:
        chunk: dict[str, int] = {}
        size = 0
        first = True
        for room, count in list(self._mine.items()):
            chunk[room] = count
            size += len(room) + 16
            if size >= SNAPSHOT_CHUNK_BYTES:
                self._publish({"k": "f", "c": chunk, "first": first, "last": False})
                chunk, size, first = {}, 0, False
        self._publish({"k": "f", "c": chunk, "first": first, "last": True})

    def _receive(self, payload: bytes) -> None:
        message = orjson.loads(payload)
        sender = message["w"]
        if sender == self.me:
            return
        kind = message["k"]
        if kind == "h" and message.get("to", self.me) == self.me and self._mine:
            self._send_snapshot()
        now = time.monotonic()
        seq = message["s"]
        peer = self._peers.get(sender)
        if peer is None:
            peer = self._peers[sender] = _Peer(seq, now)
            peer.synced = seq == 1  # we have heard everything it ever said
        else:
            if seq <= peer.seq:
                # Overtaken by a newer one: two greenlets of the sender published at once
                # (members leaving together) and the later publish arrived first. Its
                # count is the newer one and stands.
                return
            if seq != peer.seq + 1:
                peer.synced = False  # a message was lost (a worker not reading the bus)
            peer.seq = seq
            peer.seen = now
        if kind == "n":
            if message["n"]:
                peer.counts[message["r"]] = message["n"]
            else:
                peer.counts.pop(message["r"], None)
        elif kind == "f":
            if message["first"]:
                peer.counts = {}
            peer.counts.update(message["c"])
            if message["last"]:
                peer.synced = True
        if not peer.synced and now - peer.asked > self.lease:
            peer.asked = now
            self._publish({"k": "h", "to": sender})

    def _beat_forever(self) -> None:
        while True:
            gevent.sleep(self.beat)
            if self._mine:
                self._publish({"k": "b"})
            cutoff = time.monotonic() - self.lease
            for sender, peer in list(self._peers.items()):
                if peer.seen < cutoff:
                    del self._peers[sender]  # gone (killed, or lost its members long ago)
