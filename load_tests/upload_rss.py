"""How much a worker's memory grows while it takes a 50 MiB multipart upload.

Theory of operation: starts `socketify run tests.middleware.apps.static_app:server` (1 worker;
its /upload route parses the form with `req.multipart()` and hashes the file), resets the
worker's peak RSS (`echo 5 > /proc/<pid>/clear_refs`, so VmHWM restarts from the current RSS),
posts a 50 MiB file with `curl -F`, and prints the RSS before, the peak during the upload and
the growth. The bar is a growth under 10 MiB: the upload must stream to a temporary file and
never sit in memory, which needs a connection that hands the body over as it arrives.

    python load_tests/upload_rss.py [--size-mib 50]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import HOST, child_pids, free_port, serve

APP = "tests.middleware.apps.static_app:server"
BUDGET_KIB = 10 * 1024


def status_kib(pid: int, field: str) -> int:
    """A `VmRSS`/`VmHWM`-style field of /proc/<pid>/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def main(argv: Sequence[str] | None = None) -> int:
    """Upload once and print the worker's memory growth; exit 1 when over the bar."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size-mib", type=int, default=50)
    args = parser.parse_args(argv)
    port = free_port()
    argv_ = [sys.executable, "-m", "socketify.cli", "run", APP, "--workers", "1"]
    argv_ += ["--bind", f"{HOST}:{port}"]
    with tempfile.TemporaryDirectory(prefix="upload-rss-") as tmp:
        payload = Path(tmp) / "upload.bin"
        with open(payload, "wb") as out:
            block = os.urandom(1 << 20)
            for _ in range(args.size_mib):
                out.write(block)
        digest = hashlib.sha256(payload.read_bytes()).hexdigest()
        os.environ["SOCKETIFY_TEST_STATIC_ROOT"] = tmp
        with serve("ours", argv_, port) as server:
            (worker,) = child_pids(server.pid)
            before = status_kib(worker, "VmRSS")
            Path(f"/proc/{worker}/clear_refs").write_text("5")
            answer = subprocess.run(
                ["curl", "-sS", "-F", f"file=@{payload}", f"http://{HOST}:{port}/upload"],
                capture_output=True,
                check=True,
                timeout=120,
            ).stdout
            peak = status_kib(worker, "VmHWM")
    ok = digest.encode() in answer
    growth = peak - before
    print(
        f"{args.size_mib} MiB upload: worker RSS before {before} KiB, peak {peak} KiB, "
        f"growth {growth} KiB ({growth / 1024:.1f} MiB; bar < 10 MiB); "
        f"file {'intact' if ok else 'CORRUPTED'}"
    )
    return 0 if ok and growth < BUDGET_KIB else 1


if __name__ == "__main__":
    sys.exit(main())
