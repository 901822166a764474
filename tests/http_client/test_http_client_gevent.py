"""http_client under gevent's monkey-patching: requests yield to other greenlets."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.http_client.local_http import LocalServer

SCRIPT = textwrap.dedent(
    """
    from gevent import monkey
    monkey.patch_all()

    import json, sys, time
    import gevent
    from socketify import http_client

    url = sys.argv[1]
    ticks = 0

    def ticker():
        global ticks
        while True:
            ticks += 1
            gevent.sleep(0.01)

    beat = gevent.spawn(ticker)
    started = time.monotonic()
    jobs = [gevent.spawn(http_client.get, url + "/slow?delay=0.5") for _ in range(5)]
    gevent.joinall(jobs, raise_error=True)
    elapsed = time.monotonic() - started
    beat.kill()
    print(json.dumps({"elapsed": elapsed, "ticks": ticks,
                      "statuses": [job.value.status for job in jobs]}))
    """
)


def test_concurrent_greenlets_overlap_and_the_hub_keeps_running(
    http_server: LocalServer,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, http_server.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["statuses"] == [200] * 5
    assert report["elapsed"] < 1.5  # five 0.5 s answers in sequence would take 2.5 s
    assert report["ticks"] >= 20  # another greenlet ran every 10 ms meanwhile
