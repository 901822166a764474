"""examples/nexus_board: the API in-process (accounts, projects, tasks, comments, avatars,
export, live events, JSON errors), then the front end in Chromium on 2 real workers."""

from __future__ import annotations

import importlib
import itertools
import json
import struct
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from pony.orm import db_session

from socketify.testing import TestClient
from tests.support.browser import screenshot, wait_for
from tests.support.serve import REPO, Launcher

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from tests.support.serve import ServerProcess

pytestmark = pytest.mark.timeout(120)

APP = "examples.nexus_board.app"
PACKAGE = "examples.nexus_board"
SCREENSHOT = REPO / "docs" / "screenshots" / "nexus-board.png"
PROFILE_SCREENSHOT = REPO / "docs" / "screenshots" / "nexus-profile.png"
PAGE = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}  # what a browser navigation sends
PASSWORD = "correct horse battery"
FRONT_END_ORIGIN = "http://localhost:5173"


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour (browsers draw it), built with zlib alone."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = solid_png(96, 96, (95, 211, 141))
_addresses = (f"10.0.0.{n}" for n in itertools.count(1))


def _forget_app() -> None:
    for name in [name for name in sys.modules if name.startswith(PACKAGE + ".")]:
        sys.modules.pop(name)


@pytest.fixture(scope="module")
def nexus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The app imported once for this module, on its own SQLite file and uploads folder."""
    folder = tmp_path_factory.mktemp("nexus")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NEXUS_DB", f"sqlite:///{folder / 'nexus.db'}")
        patch.setenv("NEXUS_UPLOADS", str(folder / "uploads"))
        patch.setenv("NEXUS_ACCESS_LOG", "0")
        patch.setenv("NEXUS_CORS_ORIGINS", FRONT_END_ORIGIN)
        _forget_app()
        yield importlib.import_module(APP)
        _forget_app()


def client(nexus: ModuleType) -> TestClient:
    """A client from an address of its own: the auth rate limit counts per address."""
    return TestClient(nexus.server, remote_addr=next(_addresses))


def signed_up(nexus: ModuleType, name: str) -> tuple[TestClient, dict[str, Any]]:
    browser = client(nexus)
    email = f"{name.lower()}.{next(_addresses)}@example.com"
    answer = browser.post(
        "/api/auth/register", json={"email": email, "name": name, "password": PASSWORD}
    )
    assert answer.status == 201, answer.body
    return browser, answer.json()["user"]


def multipart(field: str, filename: str, data: bytes, content_type: str) -> dict[str, Any]:
    boundary = "nexus-test-boundary"
    body = (
        (
            f"--{boundary}\r\nContent-Disposition: form-data; name={field!r}; "
            f"filename={filename!r}\r\nContent-Type: {content_type}\r\n\r\n"
        )
        .replace("'", '"')
        .encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return {"data": body, "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


# -- accounts -------------------------------------------------------------------------------


def test_register_me_logout_and_login_with_a_scrypt_hash(nexus: ModuleType) -> None:
    visitor = client(nexus)
    me = visitor.get("/api/auth/me")
    assert (me.status, me.json()) == (401, {"user": None})
    answer = visitor.post(
        "/api/auth/register",
        json={"email": " Ada@Example.COM ", "name": " Ada ", "password": PASSWORD},
    )
    assert answer.status == 201
    user = answer.json()["user"]
    assert (user["email"], user["name"], user["avatar_url"]) == ("ada@example.com", "Ada", None)
    assert "nexus_sid=" in answer.headers["Set-Cookie"]
    assert "HttpOnly" in answer.headers["Set-Cookie"]
    assert visitor.get("/api/auth/me").json() == {"user": user}
    with db_session():
        stored = nexus.User[user["id"]].password_hash
    assert stored.startswith("scrypt$16384$8$1$") and PASSWORD not in stored
    # Logging out answers 204 with no body at all, and the session is gone.
    out = visitor.post("/api/auth/logout")
    assert (out.status, out.body) == (204, b"")
    assert "Content-Length" not in out.headers or out.headers["Content-Length"] == "0"
    assert visitor.get("/api/auth/me").status == 401
    wrong = visitor.post("/api/auth/login", json={"email": "ada@example.com", "password": "x" * 9})
    assert (wrong.status, wrong.json()) == (401, {"error": "wrong email or password"})
    unknown = visitor.post(
        "/api/auth/login", json={"email": "nobody@example.com", "password": PASSWORD}
    )
    assert unknown.json() == wrong.json()
    login = visitor.post("/api/auth/login", json={"email": "ADA@example.com", "password": PASSWORD})
    assert (login.status, login.json()) == (200, {"user": user})
    assert visitor.get("/api/auth/me").json() == {"user": user}


def test_a_sign_in_always_starts_a_new_session_id(nexus: ModuleType) -> None:
    visitor, user = signed_up(nexus, "Fix")
    planted = visitor.cookies["nexus_sid"]
    login = visitor.post("/api/auth/login", json={"email": user["email"], "password": PASSWORD})
    assert login.status == 200
    assert visitor.cookies["nexus_sid"] != planted
    # The id from before the sign-in is worth nothing now.
    stale = TestClient(nexus.server, remote_addr=next(_addresses))
    stale.cookies["nexus_sid"] = planted
    assert stale.get("/api/auth/me").status == 401


def test_bad_registrations_are_refused_with_json_errors(nexus: ModuleType) -> None:
    _, user = signed_up(nexus, "Taken")
    again = client(nexus).post(
        "/api/auth/register", json={"email": user["email"], "name": "X", "password": PASSWORD}
    )
    assert (again.status, again.json()) == (409, {"error": "that email is already registered"})
    short = client(nexus).post(
        "/api/auth/register", json={"email": "s@example.com", "name": "S", "password": "short"}
    )
    assert short.status == 422 and "password" in short.json()["errors"]
    for body in ({}, {"email": "not an email", "name": "N", "password": PASSWORD}, [1]):
        assert client(nexus).post("/api/auth/register", json=body).status == 422
    garbage = client(nexus).post(
        "/api/auth/register", data=b"{oops", headers={"Content-Type": "application/json"}
    )
    assert garbage.status == 400 and "error" in garbage.json()


def test_auth_routes_have_a_stricter_rate_limit_than_the_rest(nexus: ModuleType) -> None:
    visitor, user = signed_up(nexus, "Hasty")  # one of the 10 attempts of this address
    attempts = [
        visitor.post("/api/auth/login", json={"email": user["email"], "password": "wrong" * 2})
        for _ in range(10)
    ]
    assert [a.status for a in attempts] == [401] * 9 + [429]
    refused = attempts[-1]
    assert "too many sign-in attempts" in refused.json()["error"]
    assert int(refused.headers["Retry-After"]) >= 1
    # The rest of the API still answers this signed-in user.
    assert visitor.get("/api/projects").status == 200


# -- projects, tasks, comments ----------------------------------------------------------


def test_projects_have_members_and_only_the_owner_deletes(nexus: ModuleType) -> None:
    owner, _ = signed_up(nexus, "Owner")
    guest, guest_user = signed_up(nexus, "Guest")
    assert client(nexus).get("/api/projects").status == 401
    project = owner.post("/api/projects", json={"name": " Launch ", "description": "Q3"}).json()
    assert (project["name"], project["description"]) == ("Launch", "Q3")
    path = f"/api/projects/{project['id']}"
    refused = guest.get(path)
    assert (refused.status, refused.json()) == (
        403,
        {"error": "you are not a member of this project"},
    )
    assert guest.get(path + "/tasks").status == 403
    assert guest.get("/api/projects").json() == []
    added = owner.post(path + "/members", json={"email": guest_user["email"]})
    assert [m["name"] for m in added.json()["members"]] == ["Owner", "Guest"]
    assert owner.post(path + "/members", json={"email": "no@example.com"}).status == 404
    assert guest.post(path + "/members", json={"email": guest_user["email"]}).status == 403
    assert [p["id"] for p in guest.get("/api/projects").json()] == [project["id"]]
    assert guest.get(path).json()["owner"]["name"] == "Owner"
    denied = guest.delete(path)
    assert (denied.status, denied.json()) == (403, {"error": "only the owner may delete a project"})
    deleted = owner.delete(path)
    assert (deleted.status, deleted.body) == (204, b"")
    assert guest.get(path).status == 404
    assert owner.get("/api/projects/not-a-number").status == 404
    assert owner.post("/api/projects", json={"name": "   "}).status == 422


def test_tasks_move_between_statuses_and_filter_by_status_and_text(nexus: ModuleType) -> None:
    user, _ = signed_up(nexus, "Tasker")
    project = user.post("/api/projects", json={"name": "Board"}).json()
    tasks = f"/api/projects/{project['id']}/tasks"
    made = [
        user.post(tasks, json={"title": title, "description": text}).json()
        for title, text in [("Write docs", ""), ("Fix login", "the DOCS link"), ("Ship", "")]
    ]
    assert [t["status"] for t in made] == ["todo"] * 3
    moved = user.patch(f"/api/tasks/{made[1]['id']}", json={"status": "doing"})
    assert moved.json()["status"] == "doing"
    assert user.patch(f"/api/tasks/{made[2]['id']}", json={"status": "done"}).status == 200

    def titles(query: str) -> list[str]:
        return [t["title"] for t in user.get(tasks + query).json()]

    assert titles("") == ["Write docs", "Fix login", "Ship"]
    assert titles("?status=doing") == ["Fix login"]
    assert titles("?q=docs") == ["Write docs", "Fix login"]  # title or description, any case
    assert titles("?status=todo&q=DOCS") == ["Write docs"]
    bad = user.get(tasks + "?status=later")
    assert (bad.status, bad.json()) == (422, {"error": "status must be one of todo, doing, done"})
    assert user.patch(f"/api/tasks/{made[0]['id']}", json={"status": "later"}).status == 422
    assert user.patch(f"/api/tasks/{made[0]['id']}", json={"title": " "}).status == 422
    assert user.post(tasks, json={}).status == 422
    assert user.delete(f"/api/tasks/{made[2]['id']}").status == 204
    assert user.patch(f"/api/tasks/{made[2]['id']}", json={"status": "todo"}).status == 404
    stranger, _ = signed_up(nexus, "Stranger")
    assert stranger.patch(f"/api/tasks/{made[0]['id']}", json={"status": "done"}).status == 403


def test_comments_on_a_task_and_the_counts(nexus: ModuleType) -> None:
    user, me = signed_up(nexus, "Talker")
    project = user.post("/api/projects", json={"name": "Chat"}).json()
    task = user.post(f"/api/projects/{project['id']}/tasks", json={"title": "Talk"}).json()
    comments = f"/api/tasks/{task['id']}/comments"
    first = user.post(comments, json={"body": " <b>hi</b> "})
    assert first.status == 201
    assert (first.json()["body"], first.json()["author"]) == (
        "<b>hi</b>",
        {"id": me["id"], "name": "Talker"},
    )
    user.post(comments, json={"body": "second"})
    assert [c["body"] for c in user.get(comments).json()] == ["<b>hi</b>", "second"]
    assert user.post(comments, json={"body": "  "}).status == 422
    listed = user.get(f"/api/projects/{project['id']}/tasks").json()
    assert listed[0]["comments"] == 2
    stats = user.get("/api/stats").json()
    assert stats == {"projects": 1, "tasks": 1, "by_status": {"todo": 1, "doing": 0, "done": 0},
                     "comments": 2}  # fmt: skip
    board = user.get("/api/projects").json()
    assert board[0]["counts"] == {"todo": 1, "doing": 0, "done": 0}


def test_the_export_is_a_json_download_of_every_project(nexus: ModuleType) -> None:
    user, me = signed_up(nexus, "Exporter")
    project = user.post("/api/projects", json={"name": "Kept"}).json()
    task = user.post(f"/api/projects/{project['id']}/tasks", json={"title": "T"}).json()
    user.post(f"/api/tasks/{task['id']}/comments", json={"body": "noted"})
    answer = user.get("/api/export/projects.json")
    assert answer.headers["Content-Disposition"] == 'attachment; filename="nexus-export.json"'
    assert answer.headers["Content-Type"].startswith("application/json")
    export = answer.json()
    assert export["exported_by"]["id"] == me["id"]
    [kept] = export["projects"]
    assert kept["name"] == "Kept"
    assert [c["body"] for c in kept["tasks"][0]["comment_list"]] == ["noted"]


# -- profile and avatars --------------------------------------------------------------------


def test_the_profile_and_an_avatar_checked_for_type_and_size(nexus: ModuleType) -> None:
    user, me = signed_up(nexus, "Face")
    renamed = user.patch("/api/profile", json={"name": " Grace ", "bio": "compilers"})
    assert (renamed.json()["user"]["name"], renamed.json()["user"]["bio"]) == ("Grace", "compilers")
    assert user.patch("/api/profile", json={"name": ""}).status == 422
    uploaded = user.post("/api/profile/avatar", **multipart("avatar", "me.png", PNG, "image/png"))
    assert uploaded.status == 200, uploaded.body
    url = uploaded.json()["user"]["avatar_url"]
    assert url.startswith(f"/uploads/avatar_{me['id']}_") and url.endswith(".png")
    image = client(nexus).get(url)
    assert (image.status, image.body) == (200, PNG)
    assert image.headers["Content-Type"] == "image/png"
    assert image.headers["Cache-Control"] == "public, max-age=3600"
    # The type comes from the bytes: a script named .png is refused, so is a non-image.
    for name, data, kind in [("x.png", b"<script>alert(1)</script>", "image/png"),
                             ("x.txt", b"hello", "text/plain")]:  # fmt: skip
        refused = user.post("/api/profile/avatar", **multipart("avatar", name, data, kind))
        assert refused.status == 415
        assert refused.json() == {"error": "the avatar must be a PNG, JPEG, GIF or WebP image"}
    too_big = PNG + bytes(2 << 20)
    refused = user.post(
        "/api/profile/avatar", **multipart("avatar", "big.png", too_big, "image/png")
    )
    assert refused.status == 413 and "too large" in refused.json()["error"]
    assert (
        user.post("/api/profile/avatar", **multipart("other", "me.png", PNG, "image/png")).status
        == 422
    )
    assert user.post("/api/profile/avatar", json={"avatar": "x"}).status == 415
    # A new avatar replaces the old file; the old URL is gone.
    jpeg = b"\xff\xd8\xff\xe0" + bytes(32)
    replaced = user.post("/api/profile/avatar", **multipart("avatar", "me.jpg", jpeg, "image/jpeg"))
    assert replaced.json()["user"]["avatar_url"].endswith(".jpg")
    assert client(nexus).get(url).status == 404
    assert client(nexus).get("/api/profile/avatar").status == 405


# -- the rest of the site -------------------------------------------------------------------


def test_api_errors_stay_json_and_page_navigations_get_the_front_end(nexus: ModuleType) -> None:
    visitor = client(nexus)
    health = visitor.get("/api/health")
    assert health.json() == {"ok": True, "service": "nexus-board", "version": "0.2.0"}
    for path in ("/api/nope", "/api/projects/1/nothing"):
        missing = visitor.get(path, headers=PAGE)  # even a navigation gets JSON under /api
        assert (missing.status, missing.json()) == (404, {"error": "Not Found"})
    wrong = visitor.put("/api/health")
    assert (wrong.status, wrong.json()) == (405, {"error": "Method Not Allowed"})
    assert wrong.headers["Allow"] == "GET, HEAD"
    for path in ("/", "/projects/3", "/profile"):
        page = visitor.get(path, headers=PAGE)
        assert page.status == 200 and b'<script type="module" src="/js/main.js">' in page.body
    assert visitor.get("/uploads/avatar_1.png", headers=PAGE).status == 404
    script = visitor.get("/js/views/project.js")
    assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert script.headers["Cache-Control"] == "public, max-age=60"
    assert visitor.get("/js/missing.js").status == 404
    # No module of the front end builds HTML from strings.
    public = REPO / "examples" / "nexus_board" / "public"
    for module in public.rglob("*.js"):
        assert "innerHTML" not in module.read_text(), module


def test_cors_admits_only_the_listed_front_end_origin(nexus: ModuleType) -> None:
    visitor, _ = signed_up(nexus, "Cors")
    preflight = {
        "Access-Control-Request-Method": "PATCH",
        "Access-Control-Request-Headers": "content-type",
    }
    allowed = visitor.options("/api/tasks/1", headers={"Origin": FRONT_END_ORIGIN, **preflight})
    assert allowed.headers["Access-Control-Allow-Origin"] == FRONT_END_ORIGIN
    assert allowed.headers["Access-Control-Allow-Credentials"] == "true"
    answer = visitor.get("/api/projects", headers={"Origin": FRONT_END_ORIGIN})
    assert answer.headers["Access-Control-Allow-Origin"] == FRONT_END_ORIGIN
    # Any other site gets no CORS grant: the browser keeps the signed-in user's data from it.
    other = visitor.get("/api/projects", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in other.headers
    refused = visitor.options(
        "/api/tasks/1", headers={"Origin": "https://evil.example", **preflight}
    )
    assert "Access-Control-Allow-Origin" not in refused.headers


def test_event_streams_need_a_session_and_carry_each_members_changes(nexus: ModuleType) -> None:
    refused = client(nexus).get("/api/events")
    assert (refused.status, refused.json()) == (401, {"error": "sign in first"})
    owner, _ = signed_up(nexus, "Live")
    watcher, watcher_user = signed_up(nexus, "Watcher")
    project = owner.post("/api/projects", json={"name": "Shared"}).json()
    with watcher.sse("/api/events") as events:
        hello = events.next_event()
        assert hello.event == "hello"
        assert json.loads(hello.data)["user"]["id"] == watcher_user["id"]
        owner.post(f"/api/projects/{project['id']}/members", json={"email": watcher_user["email"]})
        joined = events.next_event()
        assert joined.event == "project" and json.loads(joined.data)["action"] == "updated"
        task = owner.post(f"/api/projects/{project['id']}/tasks", json={"title": "Go"}).json()
        owner.patch(f"/api/tasks/{task['id']}", json={"status": "done"})
        created, updated = events.next_event(), events.next_event()
        assert (created.event, json.loads(created.data)["action"]) == ("task", "created")
        assert json.loads(updated.data)["task"]["status"] == "done"
        owner.post(f"/api/tasks/{task['id']}/comments", json={"body": "done!"})
        comment = events.next_event()
        assert (comment.event, json.loads(comment.data)["comment"]["body"]) == ("comment", "done!")
        owner.delete(f"/api/projects/{project['id']}")
        gone = events.next_event()
        assert json.loads(gone.data) == {"action": "deleted", "project_id": project["id"]}


# -- the front end, in Chromium, against 2 workers ------------------------------------------


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `socketify run` of the app on 2 workers for this module's browser tests."""
    folder = tmp_path_factory.mktemp("nexus-served")
    env = {
        "NEXUS_DB": f"sqlite:///{folder / 'nexus.db'}",
        "NEXUS_UPLOADS": str(folder / "uploads"),
        "NEXUS_ACCESS_LOG": "0",
    }
    with Launcher(folder) as launcher:
        yield launcher(f"{APP}:server", workers=2, env=env)


def register_in(page: Page, url: str, name: str, email: str) -> None:
    page.goto(url + "/")
    page.click("#toggle-mode")
    page.fill("#name", name)
    page.fill("#email", email)
    page.fill("#password", PASSWORD)
    page.click("#submit")
    wait_for(page, "document.getElementById('live').textContent === 'live'")


def test_a_task_moved_in_one_browser_moves_in_another_on_the_other_worker(
    board: ServerProcess, browser: Browser
) -> None:
    alice = browser.new_context(viewport={"width": 1280, "height": 760}).new_page()
    bob = browser.new_context(viewport={"width": 1280, "height": 760}).new_page()
    try:
        register_in(bob, board.url, "Bob", "bob@example.com")
        register_in(alice, board.url, "Alice", "alice@example.com")
        assert wait_for(alice, "document.getElementById('who-name').textContent") == "Alice"
        alice.fill("#project-name", "Launch plan")
        alice.click("#new-project button[type=submit]")
        assert (
            wait_for(alice, "document.getElementById('project-title')?.textContent")
            == "Launch plan"
        )
        project_url = alice.url
        alice.fill("#member-email", "bob@example.com")
        alice.click("#add-member button[type=submit]")
        wait_for(alice, "document.querySelectorAll('#members .member').length === 2")
        to_do = "document.querySelectorAll('.column[data-status=todo] li.task').length"
        for number, title in enumerate(
            ["Write the announcement", "Book the venue", "Send invitations"]
        ):
            alice.fill("#task-title", title)
            alice.click("#new-task button[type=submit]")
            wait_for(alice, f"{to_do} === {number + 1}")
        # Bob's page holds its event stream on the worker Alice's does not.
        bob.goto(project_url)
        for _ in range(30):
            holders = [wait_for(page, "document.body.dataset.worker") for page in (alice, bob)]
            if holders[0] != holders[1]:
                break
            bob.reload()
        else:
            pytest.fail("every page landed on the same worker")
        wait_for(bob, "document.querySelectorAll('.column[data-status=todo] li.task').length === 3")
        # Alice drags the first card to "Doing"; Bob sees it move.
        card = alice.locator("li.task", has_text="Write the announcement")
        card.drag_to(alice.locator(".column[data-status=doing]"))
        in_doing = (
            "[...document.querySelectorAll('.column[data-status=doing] li.task .title')]"
            ".map(e => e.textContent).join('|')"
        )
        for page in (alice, bob):
            assert wait_for(page, f"{in_doing} === 'Write the announcement'")
        # And with the arrows: Bob moves another one right twice, Alice sees it in "Done".
        bob.locator("li.task", has_text="Book the venue").locator(".move-right").click()
        wait_for(
            bob, "document.querySelectorAll('.column[data-status=doing] li.task').length === 2"
        )
        bob.locator("li.task", has_text="Book the venue").locator(".move-right").click()
        in_done = "document.querySelector('.column[data-status=done] li.task .title')?.textContent"
        assert wait_for(alice, in_done) == "Book the venue"
        # Comments reach the other page live, as text.
        bob.locator("li.task", has_text="Write the announcement").click()
        alice.locator("li.task", has_text="Write the announcement").click()
        wait_for(alice, "!document.getElementById('comments').hidden")
        wait_for(bob, "document.getElementById('comment-body') !== null")
        bob.fill("#comment-body", "<img src=x onerror=alert(1)> draft is ready")
        bob.click("#new-comment button[type=submit]")
        newest = (
            "document.querySelector('#comments .comment-list li:last-child .body')?.textContent"
        )
        for page in (alice, bob):
            assert wait_for(page, newest) == "<img src=x onerror=alert(1)> draft is ready"
            assert page.locator("#comments img").count() == 0
        count = "document.querySelector('.column[data-status=doing] .comments-count').textContent"
        assert wait_for(alice, f"{count} === '1 comment'")
        screenshot(alice, SCREENSHOT)
        # A deep link reloads into the same view (the SPA fallback), still signed in.
        bob.reload()
        assert (
            wait_for(bob, "document.getElementById('project-title')?.textContent") == "Launch plan"
        )
        # The filter asks the server (`?q=`) and keeps only what matches.
        bob.fill("#filter-q", "venue")
        wait_for(bob, "document.querySelectorAll('li.task').length === 1")
        assert "venue" in bob.text_content("li.task .title")
    finally:
        # Pages hold their event streams open; closed first, the server can stop at once.
        alice.context.close()
        bob.context.close()


def test_profile_avatar_and_board_in_the_browser(
    board: ServerProcess, browser: Browser, tmp_path: Path
) -> None:
    page = browser.new_context(viewport={"width": 1280, "height": 760}).new_page()
    try:
        register_in(page, board.url, "Carol", "carol@example.com")
        page.fill("#project-name", "Garden")
        page.click("#new-project button[type=submit]")
        wait_for(page, "document.getElementById('project-title')?.textContent === 'Garden'")
        page.click("text=← All projects")
        assert (
            wait_for(page, "document.querySelector('#projects .project-card a')?.textContent")
            == "Garden"
        )
        page.click("nav >> text=Profile")
        wait_for(page, "document.getElementById('profile-name')?.value === 'Carol'")
        picture = tmp_path / "me.png"
        picture.write_bytes(PNG)
        page.set_input_files("#avatar-file", str(picture))
        page.click("#avatar-form button[type=submit]")
        source = wait_for(
            page, "document.querySelector('#avatar-preview img')?.getAttribute('src')"
        )
        assert source.startswith("/uploads/avatar_")
        assert wait_for(page, "document.getElementById('who-avatar').getAttribute('src')") == source
        page.fill("#profile-bio", "Gardener of projects.")
        screenshot(page, PROFILE_SCREENSHOT)
        not_an_image = tmp_path / "notes.png"
        not_an_image.write_text("just text")
        page.set_input_files("#avatar-file", str(not_an_image))
        page.click("#avatar-form button[type=submit]")
        assert "PNG, JPEG, GIF or WebP" in wait_for(
            page, "document.getElementById('avatar-error').textContent"
        )
        # A name holding HTML is shown as text, never parsed.
        page.fill("#profile-name", "<b>Carol</b>")
        page.click("#profile button[type=submit]")
        assert wait_for(page, "document.getElementById('who-name').textContent === '<b>Carol</b>'")
        assert page.locator("#who b").count() == 0
        page.click("#logout")
        wait_for(page, "document.getElementById('auth') !== null")
        assert page.evaluate("location.pathname") == "/login"
    finally:
        page.context.close()
