"""RFC 6455 / RFC 7692 conformance: the Autobahn|Testsuite fuzzing client against our echo app.

Theory of operation: `wstest` (PyPI `autobahntestsuite`) only runs on Python 2.7, so it lives
in its own virtualenv, `load_tests/.peers/autobahn` (git-ignored), which `--setup` creates
from a Python 2.7 interpreter (virtualenv itself is bootstrapped into
`load_tests/.peers/virtualenv-py2`, leaving that interpreter untouched). A run starts
`socketify run load_tests.apps.ws_echo:server` on a free port (route `/echo`: permessage-deflate
on, 64 MiB messages), writes a fuzzingclient spec for the selected cases, runs `wstest -m
fuzzingclient`, reads the `index.json` it writes, prints one row per case group with the
count of each behaviour, lists every case that is not allowed with the suite's own reason,
and saves the summary as JSON in load_tests/results/.

A case passes when its `behavior` is OK, NON-STRICT or INFORMATIONAL and its `behaviorClose`
is OK or INFORMATIONAL; anything else (FAILED, UNIMPLEMENTED, WRONG CODE, UNCLEAN, ...) makes
the exit status 1. Exit status 2 means the run could not happen (no wstest, server did not
start, wstest crashed or timed out).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import (
    HOST,
    LOAD_TESTS,
    REPO_ROOT,
    ServerFailedToStart,
    exit_on_sigterm,
    free_port,
    serve,
)

PEERS = LOAD_TESTS / ".peers"
VENV = PEERS / "autobahn"
WSTEST = VENV / "bin" / "wstest"
VIRTUALENV_PY2 = PEERS / "virtualenv-py2"  # virtualenv for Python 2.7, outside any interpreter
# Autobahn 25.10.1 is a Python 2.7 package pinning its whole dependency set (Twisted 19.10,
# autobahn 0.10.9); the last virtualenv that runs on and creates Python 2.7 is 20.21.
PACKAGES = ("autobahntestsuite==25.10.1",)
VIRTUALENV_SPEC = "virtualenv<20.22"
APP = "load_tests.apps.ws_echo:server"
PATH = "/echo"
RESULTS = LOAD_TESTS / "results"

# The full set: framing, pings, reserved bits, opcodes, fragmentation, UTF-8, close,
# limits/performance, auto-fragmentation, and permessage-deflate (12 and 13). Case 8 does
# not exist and 11 is unused by the suite.
FULL_CASES = ("1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*", "12.*", "13.*")
# A sample that runs in well under a minute, for CI (tests/realtime/test_conformance_*).
QUICK_CASES = (
    "1.*", "2.*", "3.*", "4.*", "5.*", "6.1.*", "6.2.*", "6.3.*", "6.4.*", "6.5.*", "6.6.*",
    "6.7.*", "6.8.*", "7.1.*", "7.3.*", "7.5.*", "7.7.*", "7.9.*", "10.*",
    "12.1.1", "12.1.2", "12.1.3", "12.2.1", "12.4.1", "13.1.1", "13.3.1", "13.5.1", "13.7.1",
)  # fmt: skip
ALLOWED = frozenset({"OK", "NON-STRICT", "INFORMATIONAL"})
ALLOWED_CLOSE = frozenset({"OK", "INFORMATIONAL"})
GROUPS = {
    "1": "framing",
    "2": "pings/pongs",
    "3": "reserved bits",
    "4": "opcodes",
    "5": "fragmentation",
    "6": "UTF-8",
    "7": "close handshake",
    "9": "limits/performance",
    "10": "auto-fragmentation",
    "12": "deflate: compressed messages",
    "13": "deflate: parameters",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected cases against our echo app; 0 when every case is allowed."""
    args = _parse_args(argv)
    exit_on_sigterm()
    if args.setup or args.setup_only:
        setup(args.python2)
        if args.setup_only:
            return 0 if wstest_missing() is None else 2
    if problem := wstest_missing():
        print(f"{problem}\nRun again with --setup to create {VENV} (Python 2.7 needed).")
        return 2
    cases = args.cases.split(",") if args.cases else list(QUICK_CASES if args.quick else FULL_CASES)
    port = free_port()
    argv_server = [
        *_socketify_cli(), "run", APP, "--workers", str(args.workers), "--bind", f"{HOST}:{port}",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="autobahn-") as scratch:
        outdir = Path(args.report_dir or scratch) / "reports"
        try:
            with serve("socketify", argv_server, port) as server:
                print(f"socketify (pid {server.pid}, {args.workers} worker(s)) on port {port}")
                started = time.monotonic()
                error = run_fuzzingclient(port, cases, outdir, Path(scratch), args.timeout)
                elapsed = time.monotonic() - started
                if server.process.poll() is not None:
                    error = error or f"the server exited:\n{server.log_tail()}"
        except ServerFailedToStart as failed:
            print(f"FAILED to start the echo app: {failed}", file=sys.stderr)
            return 2
        if error:
            print(error, file=sys.stderr)
            return 2
        results = read_index(outdir)
        bad = not_allowed(results)
        print(render_summary(results))
        print(f"\n{len(results)} cases in {elapsed:.0f} s; wstest {PACKAGES[0]}")
        if bad:
            print(f"\n{len(bad)} case(s) not allowed:")
            print(render_failures(results, bad, outdir))
        summary = _record(results, bad, cases, args.workers, elapsed)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"autobahn-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
        path.write_text(json.dumps(summary, indent=2) + "\n")
        print(f"Saved {path}")
    return 1 if bad else 0


def wstest_missing() -> str | None:
    """Why `wstest` cannot run, or None when it can."""
    if not WSTEST.exists():
        return f"{WSTEST} does not exist"
    check = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", "import autobahntestsuite.wstest"],
        capture_output=True,
        text=True,
    )
    if check.returncode != 0:
        lines = check.stderr.strip().splitlines() or ["import failed"]
        return f"wstest is broken: {lines[-1]}"
    return None


def find_python2(explicit: str | None) -> str | None:
    """A Python 2.7 interpreter: the given one, `python2.7` on PATH, or a pyenv 2.7 build."""
    if explicit:
        return explicit
    candidates = [shutil.which("python2.7")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/2.7*/bin/python2.7")))
    for candidate in candidates:
        if candidate and _is_python27(candidate):
            return candidate
    return None


def setup(python2: str | None) -> None:
    """Create the Python 2.7 virtualenv and install Autobahn|Testsuite into it, saying so."""
    interpreter = find_python2(python2)
    if interpreter is None:
        raise SystemExit("no Python 2.7 found (give one with --python2 PATH)")
    print(f"Installing {' '.join(PACKAGES)} into {VENV} with {interpreter} (comparison only)")
    PEERS.mkdir(exist_ok=True)
    if not (VENV / "bin" / "python").exists():
        pip2 = [interpreter, "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
        subprocess.run([*pip2, "--target", str(VIRTUALENV_PY2), VIRTUALENV_SPEC], check=True)
        env = {**os.environ, "PYTHONPATH": str(VIRTUALENV_PY2)}
        subprocess.run([interpreter, "-m", "virtualenv", "-q", str(VENV)], check=True, env=env)
    pip = [str(VENV / "bin" / "pip"), "install", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, *PACKAGES], check=True)


def fuzzingclient_spec(port: int, cases: Sequence[str], outdir: Path) -> dict[str, object]:
    """The spec `wstest -m fuzzingclient -s` reads."""
    return {
        "outdir": str(outdir),
        # A server that drops TCP instead of closing properly fails the case (the default).
        "options": {"failByDrop": True},
        "servers": [{"agent": "socketify", "url": f"ws://{HOST}:{port}{PATH}"}],
        "cases": list(cases),
        "exclude-cases": [],
        "exclude-agent-cases": {},
    }


def run_fuzzingclient(
    port: int, cases: Sequence[str], outdir: Path, scratch: Path, timeout: float
) -> str | None:
    """Run wstest to completion; None on success, else what went wrong."""
    spec = scratch / "fuzzingclient.json"
    spec.write_text(json.dumps(fuzzingclient_spec(port, cases, outdir), indent=2))
    log_path = scratch / "wstest.log"
    with log_path.open("wb") as log:
        try:
            completed = subprocess.run(
                [str(WSTEST), "-m", "fuzzingclient", "-s", str(spec)],
                cwd=scratch,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return f"wstest did not finish within {timeout:.0f} s:\n{_tail(log_path)}"
    if completed.returncode != 0 or not (outdir / "index.json").exists():
        return f"wstest exited with status {completed.returncode}:\n{_tail(log_path)}"
    return None


def read_index(outdir: Path) -> dict[str, dict[str, object]]:
    """The per-case results of the single agent in `index.json`, keyed by case id."""
    index = json.loads((outdir / "index.json").read_text())
    (agent,) = index.values()
    return dict(sorted(agent.items(), key=lambda item: case_key(item[0])))


def case_key(case_id: str) -> tuple[int, ...]:
    """Sort key that puts 9.10 after 9.9."""
    return tuple(int(part) for part in case_id.split("."))


def not_allowed(results: dict[str, dict[str, object]]) -> list[str]:
    """Case ids whose behaviour or closing behaviour is not allowed."""
    return [
        case
        for case, result in results.items()
        if result["behavior"] not in ALLOWED or result["behaviorClose"] not in ALLOWED_CLOSE
    ]


def render_summary(results: dict[str, dict[str, object]]) -> str:
    """One row per case group: how many cases showed each behaviour (and closing behaviour)."""
    by_group: dict[str, Counter[str]] = {}
    close_by_group: dict[str, Counter[str]] = {}
    for case, result in results.items():
        group = case.split(".")[0]
        by_group.setdefault(group, Counter())[str(result["behavior"])] += 1
        close_by_group.setdefault(group, Counter())[str(result["behaviorClose"])] += 1
    behaviours = sorted({b for counts in by_group.values() for b in counts}, key=_order)
    header = ["group", "what", "cases", *behaviours, "close not OK"]
    rows = [header]
    totals: Counter[str] = Counter()
    close_bad = 0
    for group in sorted(by_group, key=int):
        counts = by_group[group]
        totals.update(counts)
        bad = sum(n for b, n in close_by_group[group].items() if b not in ALLOWED_CLOSE)
        close_bad += bad
        rows.append(
            [
                group,
                GROUPS.get(group, ""),
                str(sum(counts.values())),
                *(str(counts.get(b, 0)) for b in behaviours),
                str(bad),
            ]
        )
    rows.append(
        [
            "all",
            "",
            str(sum(totals.values())),
            *(str(totals[b]) for b in behaviours),
            str(close_bad),
        ]
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in
                       enumerate(zip(row, widths, strict=True))) for row in rows]  # fmt: skip
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    return "\n".join(lines)


def render_failures(results: dict[str, dict[str, object]], bad: Sequence[str], outdir: Path) -> str:
    """One line per case that is not allowed, with the suite's explanation from its report."""
    lines = []
    for case in bad:
        result = results[case]
        why = ""
        report = outdir / str(result.get("reportfile", ""))
        if report.is_file():
            detail = json.loads(report.read_text())
            why = f"{detail.get('result', '')} | close: {detail.get('resultClose', '')}"
        lines.append(f"  {case}: {result['behavior']}/{result['behaviorClose']}  {why}")
    return "\n".join(lines)


def _record(
    results: dict[str, dict[str, object]],
    bad: Sequence[str],
    cases: Sequence[str],
    workers: int,
    elapsed: float,
) -> dict[str, object]:
    behaviours = Counter(str(r["behavior"]) for r in results.values())
    closes = Counter(str(r["behaviorClose"]) for r in results.values())
    return {
        "scenario": "autobahn-fuzzingclient",
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "tool": PACKAGES[0],
        "app": f"{APP} {PATH} (permessage-deflate on)",
        "workers": workers,
        "cases_selected": list(cases),
        "cases_run": len(results),
        "elapsed_s": round(elapsed, 1),
        "behaviour_counts": dict(behaviours),
        "close_behaviour_counts": dict(closes),
        "not_allowed": {c: [results[c]["behavior"], results[c]["behaviorClose"]] for c in bad},
        "passed": not bad,
        "cases": {
            case: {k: r.get(k) for k in ("behavior", "behaviorClose", "duration")}
            for case, r in results.items()
        },
    }


def _order(behaviour: str) -> tuple[int, str]:
    known = ["OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED"]
    return (known.index(behaviour) if behaviour in known else len(known), behaviour)


def _is_python27(interpreter: str) -> bool:
    try:
        out = subprocess.run(
            [interpreter, "-c", "import sys; print(sys.version_info[:2] == (2, 7))"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.stdout.strip() == "True"


def _socketify_cli() -> list[str]:
    script = Path(sys.executable).parent / "socketify"
    return [str(script)] if script.exists() else [sys.executable, "-m", "socketify.cli"]


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases",
        help=f"comma-separated case patterns (default: {','.join(FULL_CASES)})",
    )
    parser.add_argument(
        "--quick", action="store_true", help="the CI sample instead of the full set (< 60 s)"
    )
    parser.add_argument("--workers", type=int, default=1, help="server workers (default 1)")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds wstest may take (default 1800)"
    )
    parser.add_argument("--report-dir", help="keep wstest's HTML/JSON reports here")
    parser.add_argument("--no-save", action="store_true", help="do not write results JSON")
    parser.add_argument("--setup", action="store_true", help=f"create {VENV} first")
    parser.add_argument("--setup-only", action="store_true", help="--setup, then exit")
    parser.add_argument("--python2", help="the Python 2.7 interpreter for --setup")
    args = parser.parse_args(argv)
    if args.report_dir:
        args.report_dir = str(Path(args.report_dir).resolve())
    return args


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(main())
