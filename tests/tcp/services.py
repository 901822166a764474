"""TCP services the live tests run through `socketify run tests.tcp.services:NAME`."""

from __future__ import annotations

import time

from socketify import tcp


def _echo(conn: tcp.StreamConnection) -> None:
    for line in tcp.lines(conn, keepends=True):
        conn.send(line)


def _frame_echo(conn: tcp.StreamConnection) -> None:
    for payload in tcp.frames(conn, max_size=1024):
        conn.send(tcp.pack_frame(payload[::-1]))


def _slow(conn: tcp.StreamConnection) -> None:
    """Answer `slow` a second later, so a stop can find the handler busy."""
    for line in tcp.lines(conn):
        if line == b"slow":
            time.sleep(1.0)
        conn.send(b"done " + line + b"\n")


def _whoami(conn: tcp.StreamConnection) -> None:
    """Describe the connection: peer host, TLS version, client certificate's common name."""
    tls = conn.tls
    certificate = tls.peer_certificate if tls else None
    subject = dict(pair[0] for pair in certificate["subject"]) if certificate else {}
    fields = [conn.peer[0], tls.version if tls else "plain", subject.get("commonName", "-")]
    conn.send((" ".join(str(field) for field in fields) + "\n").encode())


def _crash(conn: tcp.StreamConnection) -> None:
    if conn.readline() == b"boom\n":
        raise RuntimeError("the handler failed on purpose")
    conn.send(b"fine\n")


def _farewell(conn: tcp.StreamConnection) -> None:
    """Echo lines; when the server stops, say goodbye and close (the read then ends)."""
    conn.on_stop(_say_goodbye)
    conn.send(b"hello\n")
    for line in tcp.lines(conn, keepends=True):
        conn.send(line)


def _say_goodbye(conn: tcp.StreamConnection) -> None:
    conn.send(b"bye: the server is stopping\n")
    conn.close()


def _watchful(conn: tcp.StreamConnection) -> None:
    """Wait for the stop instead of reading, then tell the client it came."""
    conn.send(b"waiting\n")
    if conn.wait_stop(timeout=60.0) and conn.stopping:
        conn.send(b"stop seen\n")


idle = tcp.Service(_echo, idle_timeout=0.5)
capped = tcp.Service(_echo, max_connections=1)
framed = tcp.Service(_frame_echo)
slow = tcp.Service(_slow, graceful_timeout=5)
whoami = tcp.Service(_whoami)
crash = tcp.Service(_crash)
farewell = tcp.Service(_farewell)  # graceful_timeout: the 30-second default
watchful = tcp.Service(_watchful)
