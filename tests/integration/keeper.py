"""Stands in for the service manager between restarts: holds the sockets, restarts the service.

    systemd-socket-activate -l ADDR python keeper.py PIDFILE DELAY -- COMMAND...

systemd-socket-activate execs this on the first connection with the sockets at fd 3 and up.
Like systemd with ``Restart=always`` and ``RestartSec=DELAY``, it runs COMMAND again whenever it
exits, passing the same sockets on. LISTEN_PID must name the new process, which only an exec
in between can do: ``sh -c 'LISTEN_PID=$$ exec "$@"'``. Each new pid is written to PIDFILE.
SIGTERM stops COMMAND and then the keeper.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    """Keep COMMAND running on the inherited sockets until SIGTERM."""
    pidfile, delay, separator, *command = argv
    assert separator == "--" and command, __doc__
    assert os.environ["LISTEN_PID"] == str(os.getpid()), "LISTEN_PID is not the keeper's"
    fds = range(3, 3 + int(os.environ["LISTEN_FDS"]))
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    while not stop:
        child = subprocess.Popen(
            ["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"', "sh", *command],
            pass_fds=fds,
        )
        partial = Path(pidfile + ".new")
        partial.write_text(f"{child.pid}\n")
        partial.rename(pidfile)  # readers never see a half-written pid
        while child.poll() is None:
            if stop:
                child.send_signal(signal.SIGTERM)
                child.wait()
                break
            time.sleep(0.02)
        if not stop:
            time.sleep(float(delay))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
