"""Run socketify.py's own examples unmodified and probe their routes; print the tally.

    python load_tests/socketify_py_examples.py EXAMPLES_DIR [NAME ...] [--python PYTHON] [--extras]

EXAMPLES_DIR is the `examples/` folder of a cirospaciari/socketify.py checkout (the search
tool's `fetch` gives one; `git archive HEAD examples | tar -x` unpacks it). Each example is
started as its users start it, `python NAME.py` in that folder, with this interpreter or
`--python` (so `from socketify import App` is ours where our package is installed, theirs
where socketify.py is: load_tests/.venv has it, to check what the probes expect), and
its routes are asked what socketify.py answers, as read from its code and its examples'
comments. The examples all listen on port 3000 (and one on /tmp/test.sock): each runs in a
private network namespace (`unshare --net`, root or unprivileged user namespaces needed), so
nothing else on the machine is in the way and nothing of theirs is reachable from outside.

The 24 examples the compatibility bar names run by default; `--extras` adds
hello_world_unix_domain (its Unix socket) and https (its key, made beside it in misc/ as its
comment says, encrypted with its passphrase). `--cli` serves each one with `socketify run
NAME:app --bind ADDRESS` (ours only) instead of `python NAME.py`. Needs the examples'
dependencies: ujson, jinja2, mako, aiofiles, streaming-form-data; and openssl for https.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests
import urllib3
from websockets.sync.client import connect

PORT = 3000
HTTPS_PORT = 54321
UNIX_SOCKET = "/tmp/test.sock"
URL = f"http://127.0.0.1:{PORT}"
WS = f"ws://127.0.0.1:{PORT}"
AUTH = {"Authorization": "Bearer 23456789"}
START_TIMEOUT = 20.0
Probe = Callable[[Path], None]
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # https.py's own cert


class Mismatch(AssertionError):
    """A route answered something socketify.py would not."""


def expect(condition: bool, what: str) -> None:
    """Fail the probe with `what` unless `condition`."""
    if not condition:
        raise Mismatch(what)


def get(path: str, **kwargs: object) -> requests.Response:
    """GET `path` of the example (no redirects followed)."""
    return requests.get(URL + path, timeout=10, allow_redirects=False, **kwargs)  # type: ignore[arg-type]


def answers(path: str, status: int, text: str | None = None, **kwargs: object) -> None:
    """GET `path` answers `status` (and exactly `text`)."""
    got = get(path, **kwargs)
    expect(got.status_code == status, f"GET {path}: status {got.status_code}, not {status}")
    if text is not None:
        expect(got.text == text, f"GET {path}: {got.text[:80]!r}, not {text!r}")


# -- the probes of each example -------------------------------------------------------------


def hello_world(_: Path) -> None:
    answers("/", 200, "Hello World!")


def listen_options(_: Path) -> None:
    answers("/", 200, "Hello World socketify from Python!")


def router_and_basics(_: Path) -> None:
    answers("/", 200, "Hello :)")
    got = requests.post(URL + "/anything", timeout=10)
    expect(got.text == "Any route with method: POST", f"POST /anything: {got.text!r}")
    answers("/user/agent", 200, "Your user agent is: probe/1", headers={"User-Agent": "probe/1"})
    answers("/user/1", 200, "Hello user with id 1!")
    answers("/user/2", 404, "Not Found")  # set_yield: on to the `any /*` route
    answers("/delayed?delay=0.1", 200, "Hello sorry for the delay!")
    got = get("/json")
    expect(got.headers.get("content-type") == "application/json", "/json content type")
    expect(got.json() == {"message": "I'm an application/json!"}, "/json body")
    got = get("/sleepy", headers={"User-Agent": "probe/1"})
    expect(got.json() == {"message": "I'm delayed!", "user-agent": "probe/1"}, "/sleepy body")
    got = get("/custom_header")
    expect(got.headers.get("content-type") == "application/octet-stream", "custom type")
    expect("message.txt" in got.headers.get("content-disposition", ""), "disposition")
    expect(got.text == "Downloaded this ;)", "custom_header body")
    got = get("/cookies")
    expect("spaciari=1234567890" in got.headers.get("set-cookie", ""), "the cookie is set")
    expect(got.text == "Your session_id cookie is: None", "cookies body")
    answers("/send_in_parts", 200, "I can send messages in parts!")
    got = get("/redirect")
    expect(got.status_code == 302 and got.headers.get("location") == "/redirected", "redirect")
    answers("/redirected", 200, "You got redirected to here :D")
    answers("/no/such/page", 404, "Not Found")


def not_found(_: Path) -> None:
    answers("/", 200, "Hello, World!")
    answers("/user/1", 200, "Hello user 1!")
    answers("/user/2", 404, "Not Found")
    answers("/nothing", 404, "Not Found")


def error_handler(_: Path) -> None:
    answers("/", 500, "Sorry we did something wrong")
    answers("/async", 500, "Sorry we did something wrong")


def custom_json_serializer(_: Path) -> None:
    got = get("/")
    expect(got.headers.get("content-type") == "application/json", "content type")
    expect(got.json() == {"Hello": "World!"}, "body")


def middleware(_: Path) -> None:
    answers("/", 403, "not authorized")
    answers("/", 200, "Hello, World from another middie ;)", headers=AUTH)


def middleware_sync(_: Path) -> None:
    answers("/", 403, "not authorized")
    answers("/", 200, "Hello, World", headers=AUTH)


def middleware_async(_: Path) -> None:
    answers("/user/10", 403, "not authorized")
    answers(
        "/user/10?theme_color=dark",
        200,
        "Hello, World <br/> theme: dark <br/> id: 10",
        headers=AUTH,
    )


def middleware_router(_: Path) -> None:
    answers("/", 403, "not authorized")
    answers("/", 200, "Hello, World", headers=AUTH)
    answers("/another", 200, "Hello, World from another middie ;)", headers=AUTH)
    answers("/another_way", 200, "Hello, World from another middie ;)", headers=AUTH)


def async_example(_: Path) -> None:
    answers("/?delay=0.1", 200, "Hello with delay!")
    got = get("/json", headers={"User-Agent": "probe/1"})
    expect(got.json() == {"message": "I'm delayed!", "user-agent": "probe/1"}, "/json body")
    answers("/elsewhere", 404, "Not Found")


def better_logging(_: Path) -> None:
    answers("/", 200, "Hello World!")


def upload_or_post(_: Path) -> None:
    thanks = "Thanks for the data!"
    for path in ("/", "/chunks", "/text"):
        got = requests.post(URL + path, data=b"x" * 100_000, timeout=10)
        expect(got.text == thanks, f"POST {path}: {got.status_code} {got.text[:60]!r}")
    got = requests.post(URL + "/json", json={"a": 1}, timeout=10)
    expect(got.text == thanks, f"POST /json: {got.text[:60]!r}")
    got = requests.post(URL + "/urlencoded", data={"a": "1"}, timeout=10)
    expect(got.text == thanks, f"POST /urlencoded: {got.text[:60]!r}")
    got = requests.post(URL + "/multiple", json={"a": 1}, timeout=10)
    expect(got.text == thanks, f"POST /multiple: {got.text[:60]!r}")
    files = {"file": ("a.txt", b"hello", "text/plain"), "file2": ("b.txt", b"hi", "text/plain")}
    for path in ("/formdata", "/formdata2"):
        got = requests.post(URL + path, data={"name": "probe"}, files=files, timeout=10)
        expect(got.text == thanks, f"POST {path}: {got.status_code} {got.text[:60]!r}")
    answers("/elsewhere", 404, "Not Found")


def static_files(examples: Path) -> None:
    public = examples / "public"
    got = get("/")
    expect(got.status_code == 200, f"/: {got.status_code}")
    expect(got.content == (public / "index.html").read_bytes(), "/ is public/index.html")
    got = get("/robots.txt")
    expect(got.content == (public / "robots.txt").read_bytes(), "/robots.txt")
    got = get("/media/flower.webm", headers={"Range": "bytes=0-99"})
    expect(got.status_code == 206 and len(got.content) == 100, "a range of the video")
    got = get("/index.html", headers={"If-Modified-Since": get("/").headers["last-modified"]})
    expect(got.status_code == 304, "If-Modified-Since answers 304")


def template(_: Path) -> None:
    got = get("/")
    expect(got.status_code == 200, f"/: {got.status_code}")
    expect(got.headers.get("content-type", "").startswith("text/html"), "an HTML page")
    expect("Hello, World" in got.text and "<html" in got.text.lower(), "the page rendered")


def file_stream(examples: Path) -> None:
    video = (examples / "public" / "media" / "flower.webm").read_bytes()
    got = get("/")
    expect(got.status_code == 200, f"/: {got.status_code}")
    expect(got.headers.get("content-type") == "video/webm", "video/webm")
    expect(got.content == video, f"the whole file ({len(got.content)} of {len(video)} bytes)")
    got = get("/", headers={"Range": "bytes=100-1099"})
    expect(got.status_code == 206 and got.content == video[100:1100], "a range")
    got = get("/", headers={"If-Modified-Since": got.headers["last-modified"]})
    expect(got.status_code == 304, "If-Modified-Since answers 304")


def graceful_shutdown(_: Path) -> None:
    answers("/", 200, "Hello!")
    answers("/shutdown", 200, "Good bye!")


def echo_websocket(_: Path) -> None:
    answers("/", 200, "Nothing to see here!'")
    with connect(WS + "/", open_timeout=10) as ws:
        expect(ws.recv(timeout=10) == "Hello World!", "the greeting")
        ws.send("hi")
        expect(ws.recv(timeout=10) == "hi", "a text echo")
        ws.send(b"\x00\x01")
        expect(ws.recv(timeout=10) == b"\x00\x01", "a binary echo")


def ws_close_connection(_: Path) -> None:
    echo_websocket(_)
    with connect(WS + "/", open_timeout=10) as ws:
        ws.recv(timeout=10)
        ws.send("close")
        with contextlib.suppress(Exception):
            ws.recv(timeout=10)
        expect(ws.close_code is not None, "the server closed the connection")


def broadcast(_: Path) -> None:
    answers("/", 200, "Nothing to see here!")
    with connect(WS + "/a", open_timeout=10) as one, connect(WS + "/b", open_timeout=10) as two:
        time.sleep(0.3)  # both subscribed
        one.send("to all")
        expect(two.recv(timeout=10) == "to all", "the other subscriber gets it")
        with contextlib.suppress(TimeoutError):
            echoed = one.recv(timeout=0.5)
            raise Mismatch(f"the sender got its own message back: {echoed!r}")


def upgrade(_: Path) -> None:
    answers("/", 200, "Nothing to see here!")
    with connect(WS + "/", open_timeout=10) as ws:
        expect(ws.recv(timeout=10) == "Hello World!", "the greeting")
        ws.send("hi")
        expect(ws.recv(timeout=10) == "hi", "a text echo")


def unix_domain(_: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(UNIX_SOCKET)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    expect(answer.startswith(b"HTTP/1.1 200"), f"status line {answer[:20]!r}")
    expect(answer.endswith(b"\r\n\r\nHello World!"), f"body {answer[-20:]!r}")


def https(_: Path) -> None:
    got = requests.get(f"https://127.0.0.1:{HTTPS_PORT}/", timeout=10, verify=False)
    expect(got.text == "Hello World socketify from Python!", f"body {got.text[:60]!r}")


def encrypted_key(examples: Path) -> None:
    """misc/key.pem and misc/cert.pem as https.py's comment makes them, the key encrypted
    with its passphrase 1234."""
    misc = examples / "misc"
    if (misc / "key.pem").exists():
        return
    misc.mkdir(exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-new", "-x509", "-days", "3650",
         "-subj", "/CN=localhost", "-passout", "pass:1234",
         "-keyout", str(misc / "key.pem"), "-out", str(misc / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip


def backpressure(_: Path) -> None:
    answers("/", 200, "Nothing to see here!")
    with connect(WS + "/", open_timeout=10, max_size=None) as ws:
        first = [ws.recv(timeout=10) for _ in range(200)]
    numbers = [int(re.sub(r"\D", "", str(m))) for m in first]
    expect(numbers == list(range(200)), "messages arrive in order while the server refills")


@dataclass(frozen=True)
class Example:
    """One example: its file, how to probe it, and how it stops."""

    name: str
    probe: Probe
    exits_by_itself: bool = False  # graceful_shutdown stops when asked over HTTP
    says: tuple[str, ...] = field(default=())  # what it prints once stopped
    listens: tuple[str, int] | str = ("127.0.0.1", PORT)  # or a Unix socket's path
    prepare: Callable[[Path], None] | None = None  # makes what it needs in the folder


EXAMPLES = [
    Example("hello_world", hello_world),
    Example("listen_options", listen_options),
    Example("router_and_basics", router_and_basics),
    Example("not_found", not_found),
    Example("error_handler", error_handler),
    Example("custom_json_serializer", custom_json_serializer),
    Example("middleware", middleware),
    Example("middleware_sync", middleware_sync),
    Example("middleware_async", middleware_async),
    Example("middleware_router", middleware_router),
    Example("async", async_example),
    Example("better_logging", better_logging),
    Example("upload_or_post", upload_or_post),
    Example("static_files", static_files),
    Example("template_jinja2", template),
    Example("template_mako", template),
    Example("file_stream", file_stream),
    Example("graceful_shutdown", graceful_shutdown, exits_by_itself=True, says=("App Closed!",)),
    Example("websockets", echo_websocket),
    Example("ws_close_connection", ws_close_connection),
    Example("broadcast", broadcast),
    Example("upgrade", upgrade),
    Example("upgrade_async", upgrade),
    Example("backpressure", backpressure),
]
# Beyond the 24: the calls the issue names that only these two examples make.
EXTRAS = [
    Example("hello_world_unix_domain", unix_domain, listens=UNIX_SOCKET),
    Example("https", https, listens=("127.0.0.1", HTTPS_PORT), prepare=encrypted_key),
]


# -- running them ---------------------------------------------------------------------------


def wait_listening(process: subprocess.Popen[bytes], address: tuple[str, int] | str) -> None:
    """Wait until `address` accepts (or the example exits)."""
    deadline = time.monotonic() + START_TIMEOUT
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Mismatch(f"exited with status {process.returncode} before listening")
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.5)
            probe.connect(address)
            return
        time.sleep(0.1)
    raise Mismatch(f"not listening on {address} after {START_TIMEOUT:.0f} s")


@contextlib.contextmanager
def started(
    example: Example, folder: Path, log: Path, python: str, cli: bool
) -> Iterator[subprocess.Popen[bytes]]:
    """`python NAME.py` (or `socketify run NAME:app` on its address) in `folder`, output to
    `log`; stopped (SIGINT, then SIGKILL) after."""
    if cli:
        where = example.listens
        bind = f"unix:{where}" if isinstance(where, str) else f"{where[0]}:{where[1]}"
        argv = [python, "-m", "socketify.cli", "run", f"{example.name}:app", "--bind", bind]
    else:
        argv = [python, f"{example.name}.py"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv,
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def run_one(example: Example, folder: Path, logs: Path, python: str, cli: bool) -> str | None:
    """Start, probe and stop one example: None when it answered as expected, else why not."""
    log = logs / f"{example.name}.log"
    try:
        if example.prepare is not None:
            example.prepare(folder)
        with started(example, folder, log, python, cli) as process:
            wait_listening(process, example.listens)
            example.probe(folder)
            if example.exits_by_itself:
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    raise Mismatch("did not stop by itself") from None
        output = log.read_text(errors="replace")
        for line in example.says:
            expect(line in output, f"did not print {line!r}")
    except Exception as exc:  # every failure is a result to report, not a crash
        return f"{type(exc).__name__}: {exc}"
    return None


def inside_namespace(argv: list[str]) -> bool:
    """Re-run this script in a private network namespace; False if it cannot be made."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    flags = ["--net"] if os.geteuid() == 0 else ["--net", "--map-root-user"]
    script = 'ip link set lo up && exec "$@"'
    command = [unshare, *flags, "sh", "-c", script, "sh", sys.executable, __file__, *argv]
    status = subprocess.call([*command, "--in-namespace"])
    raise SystemExit(status)


def main() -> int:
    """Run the examples named (all by default) and print one line per example and the tally."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("examples", type=Path, help="socketify.py's examples/ folder")
    parser.add_argument("names", nargs="*", help="only these examples")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/socketify-py-examples"))
    parser.add_argument("--python", default=sys.executable, help="the examples' interpreter")
    parser.add_argument(
        "--extras", action="store_true", help="also hello_world_unix_domain and https"
    )
    parser.add_argument(
        "--cli", action="store_true", help="serve each with `socketify run NAME:app` instead"
    )
    parser.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.in_namespace and not inside_namespace(sys.argv[1:]):
        print("needs `unshare --net` (util-linux) to give every example its port 3000")
        return 2
    args.logs.mkdir(parents=True, exist_ok=True)
    chosen = [e for e in EXAMPLES if not args.names or e.name in args.names]
    if args.extras:
        chosen += [e for e in EXTRAS if not args.names or e.name in args.names]
    passed = 0
    for example in chosen:
        failure = run_one(example, args.examples.resolve(), args.logs, args.python, args.cli)
        passed += failure is None
        print(f"{'ok  ' if failure is None else 'FAIL'} {example.name:24} {failure or ''}")
    print(f"{passed} of {len(chosen)} examples answer as socketify.py does (logs: {args.logs})")
    return 0 if passed == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
