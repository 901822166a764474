"""A headless Chromium driven over the DevTools protocol, for the front-end tests.

Only what the tests need: open pages, evaluate JavaScript, wait for a condition. Chromium is
Debian's `chromium` package (`.ci/run` installs it); without it the tests skip, or fail under
SOCKETIFY_REQUIRE_SERVICES=1 like the other tests that need something outside Python.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.support.services import unavailable

_DEVTOOLS = re.compile(r"DevTools listening on (ws://\S+)")


def chromium_or_skip() -> str:
    """The Chromium executable; skips the test (fails in CI) when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    unavailable("no Chromium on PATH (apt-get install chromium)")


class Browser:
    """One headless Chromium process with its own profile; a context manager. `args` are
    more command-line switches (a certificate to trust, say)."""

    def __init__(self, executable: str, args: Sequence[str] = ()) -> None:
        self._profile = tempfile.mkdtemp(prefix="socketify-chromium-")
        self._proc = subprocess.Popen(
            [
                executable,
                "--headless=new",
                "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={self._profile}",
                *args,
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._stack = contextlib.ExitStack()
        self._ws: ClientConnection = self._stack.enter_context(
            connect(self._devtools_url(), max_size=None, open_timeout=20)
        )
        self._ids = itertools.count(1)

    def _devtools_url(self) -> str:
        assert self._proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line:
                break
            found = _DEVTOOLS.search(line)
            if found:
                return found.group(1)
        raise RuntimeError("Chromium did not print its DevTools address")

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are dropped)."""
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv(timeout=30))
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def open(self, url: str) -> Page:
        """A new tab showing `url`."""
        target = self.call("Target.createTarget", url=url)["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        return Page(self, session)

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            self._proc.kill()
            self._proc.wait(10)
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab: evaluate JavaScript in it, wait for the page to reach a state."""

    def __init__(self, browser: Browser, session: str) -> None:
        self._browser = browser
        self._session = session

    def eval(self, expression: str) -> Any:
        """The value of `expression` (promises awaited), as JSON-compatible Python."""
        result = self._browser.call(
            "Runtime.evaluate",
            self._session,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 10.0) -> Any:
        """Poll `expression` until it is truthy (a thrown error counts as not yet); its value."""
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(guarded)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"page never satisfied {expression!r} in {timeout}s")
            time.sleep(0.05)
