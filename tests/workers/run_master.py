"""Run a Master serving ``fake_app`` (the worker tests start this as a subprocess).

Prints one JSON line ``{"pid": ..., "addresses": [...], "workers": [...]}`` on stdout once
every worker is ready, then supervises until stopped and exits with the master's code.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys

from workers.supervise.context import WorkerContext
from workers.supervise.master import BootError, Master, MasterConfig


def target(ctx: WorkerContext) -> None:
    """Import the app freshly in the worker (the master never imports it) and serve."""
    app = importlib.import_module("fake_app")
    app.serve(ctx)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, start the master, report readiness and wait."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bind", action="append", default=[])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--graceful-timeout", type=float, default=3.0)
    parser.add_argument("--max-requests", type=int, default=0)
    parser.add_argument("--max-requests-jitter", type=int, default=0)
    parser.add_argument("--reload-dir", action="append", default=[])
    parser.add_argument("--log-file")
    args = parser.parse_args(argv)

    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file))
    logging.basicConfig(
        level=logging.DEBUG, format="%(process)d %(name)s %(message)s", handlers=handlers
    )
    config = MasterConfig(
        binds=args.bind or ["127.0.0.1:0"],
        workers=args.workers,
        timeout=args.timeout,
        graceful_timeout=args.graceful_timeout,
        max_requests=args.max_requests,
        max_requests_jitter=args.max_requests_jitter,
        reload=bool(args.reload_dir),
        reload_dirs=tuple(args.reload_dir),
        proc_name="wtest",
    )
    master = Master(config, target)
    try:
        master.start()
    except BootError as exc:
        print(exc, file=sys.stderr)
        return 3
    report = {
        "pid": os.getpid(),
        "addresses": master.addresses,
        "workers": master.worker_pids,
        "gevent_in_master": "gevent" in sys.modules,
    }
    print(json.dumps(report), flush=True)
    return master.wait()


if __name__ == "__main__":
    sys.exit(main())
