"""What runs on this machine, read from /proc: a process's children, its group, its state.

Zombies count as gone everywhere: an exited child its parent has not reaped yet runs no code.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["child_pids", "group_pids", "is_alive", "live_processes", "process_state"]


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    return stat.rpartition(")")[2].split()


def process_state(pid: int) -> str | None:
    """The state letter of `pid` (R, S, T, Z...), None once it is gone."""
    fields = _stat(pid)
    return fields[0] if fields else None


def is_alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie does not)."""
    return process_state(pid) not in (None, "Z", "X")


def live_processes() -> Iterator[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process that still runs."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(entry)) and fields[0] not in ("Z", "X"):
            yield int(entry), int(fields[1]), int(fields[2])


def child_pids(pid: int) -> list[int]:
    """Pids of the running children of `pid`, sorted."""
    return sorted(child for child, parent, _ in live_processes() if parent == pid)


def group_pids(group: int) -> list[int]:
    """Pids of the running processes of process group `group`, sorted."""
    return sorted(pid for pid, _, pgrp in live_processes() if pgrp == group)
