"""`socketify systemd-unit`: what the generated units say, and that systemd accepts them.

`systemd-analyze verify` (Debian package `systemd`) loads the files as systemd would, without a
running systemd; a setting it cannot parse is only a warning there, so any line of its output
about our files fails the test too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from socketify.systemd_unit import UnitError, generate
from tests.support.serve import run_cli
from tests.support.services import require_program

pytestmark = pytest.mark.timeout(60)

Unit = dict[str, dict[str, list[str]]]


def parse(text: str) -> Unit:
    """Sections of key -> values (keys like After= may repeat); comments dropped."""
    sections: Unit = {}
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a setting: {line!r}"
        current.setdefault(key, []).append(value)
    return sections


def one(unit: Unit, section: str, key: str) -> str:
    values = unit[section].get(key, [])
    assert len(values) == 1, f"{section}.{key}: {values}"
    return values[0]


def test_service_is_a_notify_service_that_reloads_drains_and_restarts() -> None:
    service, socket_unit = generate("myapp.web:server", workers=3, graceful_timeout=20)
    assert socket_unit is None
    unit = parse(service)
    assert one(unit, "Service", "Type") == "notify"
    assert one(unit, "Service", "NotifyAccess") == "main"
    exec_start = one(unit, "Service", "ExecStart").split()
    assert exec_start[0] == sys.executable and os.path.isabs(exec_start[0])
    assert exec_start[1:] == [
        "-m", "socketify.cli", "run", "myapp.web:server", "--workers", "3",
        "--graceful-timeout", "20", "--bind", "127.0.0.1:8080",
    ]  # fmt: skip
    assert one(unit, "Service", "ExecReload") == "/bin/kill -HUP $MAINPID"
    assert one(unit, "Service", "KillSignal") == "SIGTERM"
    assert int(one(unit, "Service", "TimeoutStopSec")) > 20
    assert one(unit, "Service", "Restart") == "on-failure"
    assert one(unit, "Service", "WatchdogSec") == "30"
    assert one(unit, "Service", "WorkingDirectory") == os.getcwd()
    assert one(unit, "Service", "DynamicUser") == "yes"  # no --user: never root
    assert one(unit, "Install", "WantedBy") == "multi-user.target"


def test_service_is_hardened() -> None:
    unit = parse(generate("myapp:server", user="www-data", group="www-data")[0])
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectControlGroups": "yes",
        "RestrictSUIDSGID": "yes",
        "CapabilityBoundingSet": "",
        "User": "www-data",
        "Group": "www-data",
        "StateDirectory": "myapp",
    }
    assert {key: one(unit, "Service", key) for key in expected} == expected
    assert one(unit, "Service", "ProtectHome") in ("yes", "read-only")
    # An allow list, then a deny list inside it.
    assert unit["Service"]["SystemCallFilter"] == ["@system-service", "~@privileged @resources"]
    assert "DynamicUser" not in unit["Service"]


def test_socket_option_moves_the_binds_to_a_socket_unit() -> None:
    service, socket_text = generate(
        "myapp:server", name="shop", socket=True, binds=["[::]:8080", "unix:/run/shop/web.sock"]
    )
    assert socket_text is not None
    unit, sockets = parse(service), parse(socket_text)
    assert "--bind" not in one(unit, "Service", "ExecStart")
    assert one(unit, "Unit", "Requires") == "shop.socket"
    assert sockets["Socket"]["ListenStream"] == ["[::]:8080", "/run/shop/web.sock"]
    assert one(sockets, "Socket", "BindIPv6Only") == "both"
    assert one(sockets, "Socket", "FileDescriptorName") == "shop"
    assert one(sockets, "Install", "WantedBy") == "sockets.target"
    assert "RuntimeDirectory" not in unit["Service"]  # systemd creates the socket, not us


def test_privileged_port_gets_only_the_bind_capability() -> None:
    unit = parse(generate("myapp:server", binds=["0.0.0.0:80"])[0])
    assert one(unit, "Service", "CapabilityBoundingSet") == "CAP_NET_BIND_SERVICE"
    assert one(unit, "Service", "AmbientCapabilities") == "CAP_NET_BIND_SERVICE"
    # With socket activation systemd binds port 80, so the service needs no capability.
    unit = parse(generate("myapp:server", binds=["0.0.0.0:80"], socket=True)[0])
    assert one(unit, "Service", "CapabilityBoundingSet") == ""


def test_unix_socket_directory_is_writable_under_a_read_only_system() -> None:
    unit = parse(generate("myapp:server", binds=["unix:/run/myapp/web.sock", "unix:/srv/s/a"])[0])
    assert one(unit, "Service", "RuntimeDirectory") == "myapp"
    assert one(unit, "Service", "ReadWritePaths") == "/srv/s"


def test_exec_start_escapes_specifiers_variables_and_spaces() -> None:
    unit = parse(generate("myapp:server", workdir="/srv/my app 100%", binds=["unix:/srv/a b/s"])[0])
    assert one(unit, "Service", "WorkingDirectory") == "/srv/my app 100%%"
    assert one(unit, "Service", "ExecStart").endswith('--bind "unix:/srv/a b/s"')


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"workers": 0}, "--workers must be at least 1"),
        ({"name": "bad name"}, "invalid unit name"),
        ({"binds": ["127.0.0.1:0"], "socket": True}, "needs a fixed port"),
        ({"binds": ["nonsense:x"]}, "invalid bind"),
        ({"venv": "/nonexistent/venv"}, "no Python interpreter"),
    ],
)
def test_options_that_cannot_work_are_refused(options: dict[str, object], complaint: str) -> None:
    with pytest.raises(UnitError, match=complaint):
        generate("myapp:server", **options)


# -- systemd-analyze verify -----------------------------------------------------------------


def verify(directory: Path) -> None:
    """Run `systemd-analyze verify` on every unit in `directory`; any complaint fails."""
    analyze = require_program("systemd-analyze", "systemd")
    units = sorted(str(path) for path in directory.iterdir())
    result = subprocess.run(
        [analyze, "verify", *units], capture_output=True, text=True, timeout=30, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    complaints = [line for line in output.splitlines() if str(directory) in line]
    assert not complaints, output


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"user": "www-data", "group": "www-data", "workers": 4, "binds": ["0.0.0.0:80"]},
        {"socket": True, "group": "www-data", "binds": ["[::]:8080", "unix:/run/app/web.sock"]},
        {"binds": ["unix:/run/app/web.sock"], "workdir": "/home/someone/app 100%", "watchdog": 0},
    ],
    ids=["defaults", "user-and-port-80", "socket-activation", "unix-and-odd-paths"],
)
def test_generated_units_pass_systemd_analyze_verify(
    options: dict[str, object], tmp_path: Path
) -> None:
    service, socket_text = generate("myapp:server", name="myapp", **options)
    (tmp_path / "myapp.service").write_text(service)
    if socket_text is not None:
        (tmp_path / "myapp.socket").write_text(socket_text)
    verify(tmp_path)


def test_hardening_rates_ok_in_systemd_analyze_security(tmp_path: Path) -> None:
    analyze = require_program("systemd-analyze", "systemd")
    unit = tmp_path / "myapp.service"
    unit.write_text(generate("myapp:server", user="www-data")[0])
    # --threshold is the exposure times ten; systemd calls up to 3.9 "OK" (10 is "UNSAFE").
    result = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=25", str(unit)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_command_installs_units_that_verify(tmp_path: Path) -> None:
    target = tmp_path / "units"
    result = run_cli(
        "systemd-unit", "myapp:server", "--socket", "--name", "shop",
        "--bind", "127.0.0.1:8000", "--workers", "2", "--install", str(target), timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in target.iterdir()) == ["shop.service", "shop.socket"]
    assert "systemctl enable --now shop.socket" in result.stderr
    verify(target)


def test_command_prints_the_units_without_install() -> None:
    result = run_cli("systemd-unit", "myapp:server", "--socket", timeout=30)
    assert result.returncode == 0, result.stderr
    assert "[Service]" in result.stdout and "[Socket]" in result.stdout
    assert "ListenStream=127.0.0.1:8080" in result.stdout
