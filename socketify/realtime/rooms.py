"""`Rooms`: named groups of connections whose broadcasts reach the members on every worker.

Theory of operation. A process keeps only its own members. A room is, per process, the
members that joined it here, the callable that writes to each of them, and one subscription
to the room's bus channel (`<name>:<room>`), held while the room has a member here. A
broadcast is encoded once by the caller (one WebSocket frame, one SSE event), published once
on the shared bus (`socketify.state.shared_bus.default_bus()`: Redis, the pre-fork master's
shared memory, or a bus private to the process), and every subscribing process, the
publisher's own included, writes those bytes as they are to each of its members. A thousand
members cost one encoding and a thousand non-blocking writes. The bus hands each process one
publisher's messages in the order they were published, and each member is written to in the
order messages arrive, so every member sees one publisher's broadcasts in that order.

A bus message is `[n][the id of the member to skip, n bytes][the bytes to write]`. An id is
under 255 bytes, so a first byte of 255 marks the part of a message too big for one bus
record (`socketify.realtime.bus_parts`), joined again before it is delivered.

Writes never wait. Each member bounds what may wait for it (its `max_backpressure`): past
that bound its own send drops the message or closes the connection, and the other members
never notice. A member whose connection ends leaves every room it was in.

`room_size` counts the members of every worker and host: a `RoomCensus`
(`socketify.realtime.census`) on the same bus tells the others this process's counts.

What differs between kinds of connection is said by a subclass: how to write bytes to a
member (`sender_for`) and how to hear that its connection ended (`watch_close`). `pulse.Hub`
(WebSocket channels, a frame per broadcast) and `sse.Hub` (event streams, an event per
broadcast) are the two kinds.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from socketify.realtime import bus_parts
from socketify.realtime.census import RoomCensus
from socketify.state.shared_bus import default_bus
from workers.shared.bus import bus as worker_bus

__all__ = ["Member", "Rooms", "Sender"]

log = logging.getLogger("socketify.error")

MAX_ID_BYTES = 254  # one length byte, and 255 marks a part (see the module doc)

Sender = Callable[[bytes], object]


class Member(Protocol):
    """What rooms need of a connection: an id unique across processes, and whether it is open."""

    @property
    def id(self) -> str:
        """Unique across every process on the bus."""
        ...

    @property
    def alive(self) -> bool:
        """False once the connection has ended."""
        ...


M = TypeVar("M", bound=Member)


class _Room:
    """This process's side of one room: its members, how to write to each, its subscription."""

    __slots__ = ("members", "senders", "subscription")

    def __init__(self, subscription: Any) -> None:
        self.members: dict[str, Any] = {}
        self.senders: dict[str, Sender] = {}
        self.subscription = subscription  # None until the bus has subscribed


class Rooms(ABC, Generic[M]):
    """Rooms of one kind of connection, spanning workers; a subclass says how to reach one."""

    def __init__(self, name: str, bus: Any = None) -> None:
        self.name = name
        self._bus = bus
        self._rooms: dict[str, _Room] = {}
        self._joined: dict[str, set[str]] = {}  # member id -> its rooms, while it is open
        self._parts = bus_parts.PartJoiner()  # broadcasts too big for one bus message
        self.census = RoomCensus(f"{name}#census", self.bus)
        if worker_bus() is not None:
            self.census.start()  # hear the other workers' counts before the first room_size

    # -- what a kind of connection says -------------------------------------------------------

    @abstractmethod
    def sender_for(self, member: M) -> Sender:
        """The callable that writes broadcast bytes to `member`, bounded by its backlog limit."""

    @abstractmethod
    def watch_close(self, member: M, gone: Callable[[M], object]) -> None:
        """Have `gone(member)` called once when `member`'s connection ends."""

    # -- membership ---------------------------------------------------------------------------

    def bus(self) -> Any:
        """The bus broadcasts go through (the process's default bus unless given one)."""
        # The default bus is resolved per process: rooms built before a fork (`--preload`)
        # must not keep publishing on the parent's bus.
        return self._bus if self._bus is not None else default_bus()

    # The bus and the census may talk to Redis, and so let other greenlets run: another
    # member may join or leave meanwhile. So `join` and `leave` change the rooms' tables
    # first, in one step that cannot be interleaved, and only then call the bus.

    def join(self, room: str, member: M) -> bool:
        """Add `member` to `room`; False if its connection has ended or it is already in."""
        if not member.alive:
            return False
        member_id = member.id
        local = self._rooms.get(room)
        fresh = local is None
        if local is None:
            local = self._rooms[room] = _Room(None)
        elif member_id in local.members:
            return False
        local.members[member_id] = member
        local.senders[member_id] = self.sender_for(member)
        rooms = self._joined.get(member_id)
        if rooms is not None:
            rooms.add(room)
        else:
            self._joined[member_id] = {room}
            self.watch_close(member, self._forget)  # once per member, however many rooms
        if fresh:
            subscription = self.bus().subscribe(self._channel(room), partial(self._deliver, room))
            if self._rooms.get(room) is local:
                local.subscription = subscription
            else:
                subscription.cancel()  # everyone left while we subscribed
        self.census.update(room, self.local_size(room))
        return True

    def leave(self, room: str, member: M) -> bool:
        """Remove `member` from `room`; False if it was not in it."""
        local = self._rooms.get(room)
        member_id = member.id
        if local is None or local.members.pop(member_id, None) is None:
            return False
        del local.senders[member_id]
        rooms = self._joined.get(member_id)
        if rooms is not None:
            rooms.discard(room)
        if not local.members:
            # This process's last member left: stop receiving the room's broadcasts.
            del self._rooms[room]
            if local.subscription is not None:  # else `join` is still subscribing
                local.subscription.cancel()
        self.census.update(room, self.local_size(room))
        return True

    def leave_all(self, member: M) -> None:
        """Remove `member` from every room it is in."""
        for room in list(self._joined.get(member.id, ())):
            self.leave(room, member)

    def _forget(self, member: M) -> None:
        # Its connection ended. An open member that leaves all its rooms stays known, so that
        # joining again does not watch its close a second time.
        self.leave_all(member)
        self._joined.pop(member.id, None)

    # -- queries ------------------------------------------------------------------------------

    def room_size(self, room: str) -> int:
        """Members of `room` on every worker (and host); `local_size` for this process only."""
        return self.census.total(room)

    def local_size(self, room: str) -> int:
        """Members of `room` connected to this process."""
        local = self._rooms.get(room)
        return len(local.members) if local is not None else 0

    def members(self, room: str) -> list[M]:
        """A snapshot of this process's members of `room`."""
        local = self._rooms.get(room)
        return list(local.members.values()) if local is not None else []

    def rooms(self, member: M) -> set[str]:
        """The rooms `member` is in."""
        return set(self._joined.get(member.id, ()))

    # -- broadcasting -------------------------------------------------------------------------

    def publish(self, room: str, data: bytes, exclude: M | None = None) -> None:
        """Write `data`, encoded once, to every member of `room` everywhere but `exclude`."""
        if exclude is None:
            payload = b"\x00" + data
        else:
            skip = exclude.id.encode("utf-8")
            if len(skip) > MAX_ID_BYTES:
                raise ValueError(f"a member id over {MAX_ID_BYTES} bytes cannot be excluded")
            payload = b"".join((bytes((len(skip),)), skip, data))
        bus_parts.publish(self.bus(), self._channel(room), payload)

    def _channel(self, room: str) -> str:
        return f"{self.name}:{room}"

    def _deliver(self, room: str, payload: bytes) -> None:
        # The bus calls this once per broadcast to a room with members in this process.
        if payload[0] == bus_parts.PART_MARK:
            whole = self._parts.add(payload)
            if whole is None:
                return
            payload = whole
        local = self._rooms.get(room)
        if local is None:
            return  # the last member left after the message was published
        n = payload[0]
        skip = payload[1 : 1 + n].decode("utf-8")
        data = payload[1 + n :]
        # A snapshot: a write may end a connection, whose member then leaves the room.
        for member_id, send in list(local.senders.items()):
            if member_id == skip:
                continue
            try:
                send(data)
            except Exception:
                # One broken member must not keep the message from the others.
                log.exception("room %r: writing a broadcast to member %s failed", room, member_id)
