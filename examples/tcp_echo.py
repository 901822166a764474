"""A line echo service over raw TCP: every line a client sends comes back.

    socketify run examples.tcp_echo:service --bind 127.0.0.1:7000
    printf 'hello\\n' | nc -q1 127.0.0.1 7000

A line over 1 KiB gets an error line and the connection closes; one silent for a minute is
closed too. `--certfile`/`--keyfile` serve it over TLS (`openssl s_client -connect ...`).

Guide: docs/guide/tcp.md.
"""

from __future__ import annotations

from socketify import tcp

MAX_LINE = 1024


def echo(conn: tcp.StreamConnection) -> None:
    """Send every line back as it was received, until the client closes."""
    try:
        for line in tcp.lines(conn, keepends=True):
            conn.send(line)
    except tcp.LineTooLong as exc:
        conn.send(f"error: {exc}\n".encode())


service = tcp.Service(echo, max_line=MAX_LINE, idle_timeout=60)
