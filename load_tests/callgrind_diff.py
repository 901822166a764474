"""Per-request instructions by function: the difference between the two callgrind runs that
`load_tests/instructions.py --keep DIR` leaves, divided by the requests of the loaded run.

    python load_tests/callgrind_diff.py DIR [--requests 2000] [--top 40] [--self]

Theory of operation: each run's worker dump (the larger of the two processes' totals) goes
through `callgrind_annotate` (inclusive costs unless --self); the function's count in the base
run, which sent no measured requests, is subtracted from the loaded run's, so start-up and
shut-down cancel out and what is left is what the requests cost. Python code shows as the
interpreter's C functions (the eval loop, dict and allocator calls, the collector), which is
where the "why" of a Python-level profile is found.
"""

from __future__ import annotations

import argparse
import glob
import re
import subprocess
from pathlib import Path

LINE = re.compile(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*?)\s*$")


def worker_dump(folder: Path) -> str:
    """The dump in `folder` with the larger total: the worker's (the other is the master's)."""
    best, best_total = "", -1
    for name in glob.glob(f"{folder}/callgrind.*"):
        with open(name) as dump:
            for line in dump:
                if line.startswith("summary:") and int(line.split()[1]) > best_total:
                    best, best_total = name, int(line.split()[1])
    if not best:
        raise SystemExit(f"no callgrind dump in {folder}")
    return best


def costs(dump: str, inclusive: bool) -> dict[str, int]:
    """Instructions by `file:function` as callgrind_annotate reports them."""
    text = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
         "--threshold=100", dump],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found: dict[str, int] = {}
    for line in text.splitlines():
        match = LINE.match(line)
        if match and not match[2].startswith("PROGRAM TOTALS"):
            name = re.sub(r"\s*\[.*\]$", "", match[2])
            found[name] = found.get(name, 0) + int(match[1].replace(",", ""))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("folder", type=Path, help="what instructions.py --keep was given")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--self", dest="inclusive", action="store_false",
                        help="self costs instead of inclusive ones")  # fmt: skip
    args = parser.parse_args()
    base = costs(worker_dump(args.folder / "base"), args.inclusive)
    loaded = costs(worker_dump(args.folder / "loaded"), args.inclusive)
    per_request = {
        name: (count - base.get(name, 0)) / args.requests for name, count in loaded.items()
    }
    ranked = sorted(per_request.items(), key=lambda item: -item[1])[: args.top]
    for name, count in ranked:
        print(f"{count:>12,.0f}  {name}")


if __name__ == "__main__":
    main()
