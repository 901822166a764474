"""`python -m load_tests.tfb setup | verify | bench | drop`.

    python -m load_tests.tfb setup                  # make and seed `world` and `fortune`
    python -m load_tests.tfb verify [--only NAMES]  # check the answers, time nothing
    flock /tmp/bench.lock python -m load_tests.tfb bench [--rounds 2] [--duration 5]
        [--connections 50] [--workers 1,2] [--only ours-pony,starlette] [--tests db,fortunes]
    python -m load_tests.tfb drop                   # drop the schema

The database is $TFB_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), the
tables in its `?schema=` (default `tfb`). `bench` seeds the tables anew, then verifies and
measures (see bench.py), prints the table with the bars' ratios, and writes
load_tests/results/tfb-*.json and a chart next to it. Peers need load_tests/.venv with
load_tests/contenders.py's PEER_PACKAGES.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from load_tests.contenders import PEER_PACKAGES, peers_missing
from load_tests.harness import HOST, exit_on_sigterm, free_port, serve
from load_tests.tfb import schema
from load_tests.tfb.bench import Bench, render_table, save
from load_tests.tfb.contenders import IMPLEMENTATIONS, SERVERS, Implementation
from load_tests.tfb.verify import PATHS, TEST_TYPES, Target, verify


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; the exit status is 1 when a check or a bar failed."""
    parser = argparse.ArgumentParser(
        prog="python -m load_tests.tfb",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=("setup", "verify", "bench", "drop"))
    parser.add_argument(
        "--only", help="implementations, comma-separated: " + ", ".join(IMPLEMENTATIONS)
    )
    parser.add_argument("--tests", default=",".join(TEST_TYPES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2")
    args = parser.parse_args(argv)
    exit_on_sigterm()
    if args.command == "setup":
        print(f"seeded schema {schema.seed()!r}")
        return 0
    if args.command == "drop":
        schema.drop()
        return 0
    names = args.only.split(",") if args.only else list(IMPLEMENTATIONS)
    unknown = [name for name in names if name not in IMPLEMENTATIONS]
    if unknown:
        parser.error(f"unknown implementation(s) {unknown}: pick from {list(IMPLEMENTATIONS)}")
    implementations = [IMPLEMENTATIONS[name] for name in names]
    if problem := _peers_problem(implementations):
        print(problem, file=sys.stderr)
        return 2
    tests = tuple(t for t in TEST_TYPES if t in args.tests.split(","))
    schema.seed()
    if args.command == "verify":
        return _verify(implementations, tests)
    bench = Bench(
        implementations,
        tests=tests,
        workers=tuple(int(w) for w in args.workers.split(",")),
        rounds=args.rounds,
        duration=args.duration,
        connections=args.connections,
    )
    command = "python -m load_tests.tfb " + shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"{command}\n", flush=True)
    bench.run()
    table = render_table(bench.results, names, tests)
    print(table)
    json_path, chart = save(bench, table, command)
    print(f"\nresults: {json_path}" + (f"\nchart: {chart}" if chart else ""))
    return 1 if bench.results.failures else 0


def _peers_problem(implementations: list[Implementation]) -> str | None:
    modules = [m for i in implementations for m in SERVERS[i.server].modules]
    if not modules or not (missing := peers_missing(modules)):
        return None
    return (
        f"The peers are not installed ({missing}). Install them with\n"
        f"  load_tests/.venv/bin/pip install {' '.join(PEER_PACKAGES)}\n"
        f"or keep to ours: --only ours-pony,ours-raw"
    )


def _verify(implementations: list[Implementation], tests: tuple[str, ...]) -> int:
    failed = 0
    for server_name in dict.fromkeys(i.server for i in implementations):
        server = SERVERS[server_name]
        port = free_port()
        mine = [i for i in implementations if i.server == server_name]
        ready = mine[0].prefix + PATHS[mine[0].tests[0]].partition("?")[0]
        cwd = {"cwd": server.cwd} if server.cwd is not None else {}
        with serve(server_name, server.command(port, 1), port, ready_path=ready, **cwd):
            for impl in mine:
                own = tuple(t for t in tests if t in impl.tests)
                problems = verify(Target(impl.name, f"http://{HOST}:{port}", impl.prefix), own)
                failed += bool(problems)
                print(f"{impl.name:13} {'FAIL' if problems else 'pass'} ({', '.join(own)})")
                for problem in problems:
                    print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
