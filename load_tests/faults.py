"""Fault experiments: what an operator tries before production, each printing its figure.

    python load_tests/faults.py                 # every experiment, full length
    python load_tests/faults.py slow-reader     # one (or several) by name
    python load_tests/faults.py --short         # the short versions that CI runs as tests
    python load_tests/faults.py --list

Each experiment starts the real server through `socketify run` on a free loopback port, does
to it what a misbehaving client, a dying process or a lost backend would do, and returns a
`Figure`: the measured value, the bar it is judged against, and whether it held. The exit
status is 0 when every experiment that ran held its bar, 1 otherwise, 2 when one could not run.
`tests/faults/` runs each experiment's short version (`short=True`) as a test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `python load_tests/...`

from load_tests.harness import exit_on_sigterm


@dataclass(frozen=True)
class Figure:
    """What one experiment measured, and whether it held its bar."""

    name: str
    value: float
    unit: str
    bar: str
    held: bool
    details: list[str] = field(default_factory=list)

    def report(self) -> str:
        """A few lines for a person: the figure, the bar, the verdict, then the details."""
        verdict = "held" if self.held else "MISSED"
        lines = [f"{self.name}: {self.value:,.2f} {self.unit}  (bar: {self.bar})  {verdict}"]
        lines += [f"    {line}" for line in self.details]
        return "\n".join(lines)


class CouldNotRun(RuntimeError):
    """The experiment could not be set up (a tool or service is missing): no verdict."""


Experiment = Callable[[bool], Figure]  # short -> Figure
EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str) -> Callable[[Experiment], Experiment]:
    """Register `fn(short) -> Figure` under `name`."""

    def register(fn: Experiment) -> Experiment:
        EXPERIMENTS[name] = fn
        return fn

    return register


def run(name: str, *, short: bool = False) -> Figure:
    """Run one experiment by name (what the tests call)."""
    return EXPERIMENTS[name](short)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the named experiments (all by default) and print each figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments to run (default: all)")
    parser.add_argument("--short", action="store_true", help="the short versions CI runs")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, fn in EXPERIMENTS.items():
            print(f"{name:16} {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    unknown = [name for name in args.names if name not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s): {', '.join(unknown)}; see --list")
    exit_on_sigterm()
    status = 0
    for name in args.names or list(EXPERIMENTS):
        try:
            figure = run(name, short=args.short)
        except CouldNotRun as exc:
            print(f"{name}: could not run: {exc}")
            status = max(status, 2)
            continue
        print(figure.report(), flush=True)
        if not figure.held:
            status = max(status, 1)
    return status


# -- experiments ------------------------------------------------------------------------------
# Each one is a function `fn(short: bool) -> Figure` under `@experiment("name")`, in its own
# section below.


if __name__ == "__main__":
    sys.exit(main())
