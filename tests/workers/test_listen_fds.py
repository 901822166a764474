"""`workers.supervise.systemd.listen_sockets` and `Listeners(inherited=...)`, in a fresh interpreter
whose descriptors 3 and up are arranged as systemd arranges them (pytest's own are in use here)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(60)

# Opens the sockets, moves them to 3, 4..., sets LISTEN_* and reports what the code under test saw.
PRELUDE = textwrap.dedent(
    """
    import json, os, socket, sys
    from workers.supervise.listeners import Listeners
    from workers.supervise.sockets import BindError
    from workers.supervise.systemd import listen_sockets

    keep = []  # a socket object closed by the GC would close the descriptor it was given

    def place(socks, names=None, pid=None):
        keep.extend(socks)
        fds = [os.dup(s.fileno()) for s in socks]
        for index, fd in enumerate(fds):
            os.dup2(fd, 3 + index)  # inheritable, as systemd passes them
        os.environ["LISTEN_PID"] = str(pid or os.getpid())
        os.environ["LISTEN_FDS"] = str(len(socks))
        if names:
            os.environ["LISTEN_FDNAMES"] = ":".join(names)

    def report(**values):
        values["env_left"] = sorted(k for k in os.environ if k.startswith("LISTEN_"))
        print(json.dumps(values))
    """
)


def run(code: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_inherited_sockets_replace_the_binds_and_are_shared_by_every_slot() -> None:
    seen = run(
        """
        tcp = socket.create_server(("127.0.0.1", 0))
        path = f"/tmp/sd-listen-{os.getpid()}.sock"
        unix = socket.socket(socket.AF_UNIX); unix.bind(path); unix.listen()
        port = tcp.getsockname()[1]
        place([tcp, unix], names=["web", "admin"])
        inherited = listen_sockets()
        listeners = Listeners(["127.0.0.1:1"], slots=3, inherited=inherited)
        shared = [sorted(s.fileno() for s in listeners.sockets_for(i)) for i in range(3)]
        added = listeners.add_slot()
        fds = [s.fileno() for s in inherited]
        inheritable = [os.get_inheritable(fd) for fd in fds]
        listeners.close()
        report(
            fds=fds,
            inheritable=inheritable,
            addresses=listeners.addresses,
            port=port,
            shared=shared,
            added=added,
            has_tcp=listeners.has_tcp,
            file_kept=os.path.exists(path),  # systemd's file: closing must not unlink it
        )
        os.unlink(path)
        """
    )
    assert seen["fds"] == [3, 4]
    assert seen["inheritable"] == [False, False]  # programs the app runs do not get them
    assert seen["addresses"][0] == ["127.0.0.1", seen["port"]]
    assert str(seen["addresses"][1]).startswith("/tmp/sd-listen-")
    assert seen["shared"] == [[3, 4]] * 3  # every slot accepts from the same two sockets
    assert seen["added"] == 3 and seen["has_tcp"] is False  # no SO_REUSEPORT copies, ever
    assert seen["file_kept"] is True
    assert seen["env_left"] == []


def test_variables_meant_for_another_process_are_ignored_and_removed() -> None:
    seen = run(
        """
        place([socket.create_server(("127.0.0.1", 0))], pid=1)
        report(count=len(listen_sockets()))
        """
    )
    assert seen == {"count": 0, "env_left": []}


@pytest.mark.parametrize(
    ("setup", "complaint"),
    [
        ("place([socket.socket(socket.AF_INET, socket.SOCK_DGRAM)], names=['dns'])",
         "fd 3 (dns) is not a listening stream socket"),
        ("place([socket.socket()], names=['idle'])", "fd 3 (idle) is not a listening stream"),
        ("r, w = os.pipe(); os.dup2(r, 3); place([], pid=None); "
         "os.environ['LISTEN_FDS'] = '1'", "LISTEN_FDS: fd 3 is not a socket"),
    ],
    ids=["datagram", "not-listening", "pipe"],
)  # fmt: skip
def test_descriptor_that_cannot_be_served_is_a_bind_error(setup: str, complaint: str) -> None:
    seen = run(
        f"""
        {setup}
        try:
            listen_sockets()
            report(error=None)
        except BindError as exc:
            report(error=str(exc))
        """
    )
    assert complaint in str(seen["error"])
