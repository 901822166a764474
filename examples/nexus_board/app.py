"""Nexus Board: a project board with accounts, a kanban, comments and live updates.

    socketify run examples.nexus_board.app:server --bind 127.0.0.1:8080 --workers 2
    open http://127.0.0.1:8080/

    curl -c jar -X POST localhost:8080/api/auth/register \\
         -d '{"email": "ada@example.com", "name": "Ada", "password": "correct horse"}'
    curl -b jar -X POST localhost:8080/api/projects -d '{"name": "Launch"}'
    curl -b jar -X POST localhost:8080/api/projects/1/tasks -d '{"title": "write the docs"}'
    curl -b jar -X PATCH localhost:8080/api/tasks/1 -d '{"status": "doing"}'
    curl -b jar 'localhost:8080/api/projects/1/tasks?status=doing&q=docs'
    curl -b jar -F avatar=@me.png localhost:8080/api/profile/avatar
    curl -b jar -OJ localhost:8080/api/export/projects.json     # nexus-export.json
    curl -b jar -N localhost:8080/api/events                     # event: task, data: {...}

Every worker serves every user: accounts, projects, tasks and comments live in the database
(`NEXUS_DB`, default `nexus.db` in `examples/.data/`; `postgresql://...` works the same),
sessions in the store shared by the workers, and a change is announced over SSE to each member
of the project through an `sse.Hub` room per user, whichever worker holds that user's page.
Passwords are hashed with scrypt. Auth routes have a stricter rate limit than the rest of the
API (`NEXUS_AUTH_RATE_LIMIT`, `NEXUS_RATE_LIMIT`: "burst/refill-per-second"). Avatars go
to `NEXUS_UPLOADS` (default `examples/.data/nexus-uploads/`) and are served under `/uploads`.
Anything under `/api` answers JSON, errors included; every other page navigation gets the front end
(`public/`, plain JavaScript modules: nothing to build).

Guide: docs/guide/sessions.md, docs/guide/sse.md, docs/guide/static-files.md.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from pony.orm import commit, count, db_session, select

import socketify.db
from examples._data import data_path
from socketify import HTTPError, Request, Response, Server, cors, ratelimit, static_files
from socketify import logging as access_log
from socketify.core.body import BodyLimits
from socketify.core.compression import CompressionOptions
from socketify.core.headers import content_disposition
from socketify.core.routing import Handler
from socketify.middleware import request_id
from socketify.realtime import sse
from socketify.state import sessions
from socketify.validate import body, field

from .models import STATUSES, Comment, Project, Task, User, db, stamp
from .passwords import hash_password, verify_password

VERSION = "0.2.0"
PUBLIC = Path(__file__).resolve().parent / "public"
UPLOADS = Path(os.environ.get("NEXUS_UPLOADS") or data_path("nexus-uploads")).resolve()
SESSION_DAYS = 14
MAX_AVATAR = 2 << 20
# An avatar's type is decided by its first bytes, never by the name or Content-Type sent.
IMAGE_SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": ".png",
    b"\xff\xd8\xff": ".jpg",
    b"GIF87a": ".gif",
    b"GIF89a": ".gif",
}
AVATAR_LIMITS = BodyLimits(max_parts=4, max_field_size=1024, max_file_size=MAX_AVATAR)


@functools.cache
def unknown_user_hash() -> str:
    """Verified against when the email is unknown, so both failures take the same time."""
    return hash_password("no such user")


def rate(variable: str, default: str) -> tuple[float, float]:
    """A "burst/refill" pair from the environment, e.g. NEXUS_RATE_LIMIT=120/40."""
    burst, _, refill = os.environ.get(variable, default).partition("/")
    return float(burst), float(refill)


def client_key(req: Request) -> str:
    """Signed-in users are limited each on their own; everyone else by address."""
    user_id = req.session.get("user_id")
    return f"user:{user_id}" if user_id is not None else req.remote_ip


def api_answers_json(req: Request, res: Response, next: Callable[[], None]) -> None:
    """Errors under /api are JSON whoever raised them: the router's 404/405, a limit's 413,
    the rate limiter's 429, a body that is not JSON."""
    if not req.path.startswith("/api/"):
        next()
        return
    try:
        next()
    except HTTPError as error:
        res.reset_for_error()
        for name, value in error.headers.items():
            res.set_header(name, value)
        res.json_error(error.status, error.message or "request refused")
        return
    if res.status_code >= 400 and not (res.content_type or "").startswith("application/json"):
        message = res.body.decode(errors="replace").strip() or "request refused"
        status = res.status_code
        res.reset_for_error()  # keeps Allow, Retry-After and the rate-limit headers
        res.json_error(status, message)


def require_auth(req: Request, res: Response, next: Callable[[], None]) -> None:
    """Let signed-in users through, with their `User` in `req.locals["user"]`; else 401."""
    user_id = req.session.get("user_id")
    user = User.get(id=user_id) if isinstance(user_id, int) else None
    if user is None:
        res.json_error(401, "sign in first")
        return
    req.locals["user"] = user
    next()


UPLOADS.mkdir(parents=True, exist_ok=True)
server = Server(compression=CompressionOptions(min_size=512), max_body_size=8 << 20)
if os.environ.get("NEXUS_ACCESS_LOG", "1") != "0":
    server.use(access_log.middleware())
server.use(request_id())
# Credentialed CORS only for the origins listed (a front-end dev server, say): reflecting
# any origin with credentials would let every web site act as the signed-in user.
if origins := [o.strip() for o in os.environ.get("NEXUS_CORS_ORIGINS", "").split(",") if o.strip()]:
    server.use(cors.middleware(origins, allow_credentials=True, allow_headers="Content-Type"))
server.use(api_answers_json)
server.use(static_files.serve(UPLOADS, "/uploads", cache_max_age=3600))
server.use(static_files.spa(PUBLIC, exclude=["/api", "/uploads"], cache_max_age=60))
server.use(
    sessions.middleware(
        secret=os.environ.get("NEXUS_SECRET", "change me: nexus board " * 2),
        cookie_name="nexus_sid",
        ttl=SESSION_DAYS * 86400,
        rolling=True,
    )
)
server.use(ratelimit.middleware(*rate("NEXUS_RATE_LIMIT", "120/40"), key=client_key))
# A db_session per request on the routes that use the database; Pony errors -> HTTP. Not a
# server-wide middleware: a session holds its connection from the first query to the end of
# the request, and sign-in must not hold one while it hashes a password.
in_db = socketify.db.middleware(db)
auth_limit = ratelimit.middleware(
    *rate("NEXUS_AUTH_RATE_LIMIT", "10/0.2"),
    message="too many sign-in attempts; wait a minute and try again",
    prefix="nexus-auth",
)
hub = sse.Hub(name="nexus")


def api(method: str, pattern: str) -> Callable[[Handler], Handler]:
    """Register the decorated handler at /api + `pattern`, for signed-in users only."""

    def register(handler: Handler) -> Handler:
        server.route(method, "/api" + pattern, handler).use(in_db).use(require_auth)
        return handler

    return register


# -- live updates -------------------------------------------------------------------------


def announce(event: str, payload: dict[str, Any], users: Iterable[int]) -> None:
    """Send `event` to every open page of these users, on any worker. Call after commit():
    a page must never learn of a change that is then rolled back."""
    data = orjson.dumps(payload).decode()
    for user_id in set(users):
        hub.broadcast(f"user:{user_id}", data, event=event)


def member_ids(project: Project) -> list[int]:
    return [member.id for member in project.members]


def events(req: Request, res: Response) -> None:
    user_id = req.session.get("user_id")
    user = User.get(id=user_id) if isinstance(user_id, int) else None
    if user is None:
        res.json_error(401, "sign in first")
        return
    stream = sse.upgrade(req, res, heartbeat=25)
    stream.comment("nexus board live updates")
    # The worker's pid tells a client (and the tests) which worker holds its stream.
    hello = {"user": user.as_json(), "worker": os.getpid()}
    stream.send_event("hello", orjson.dumps(hello).decode())
    hub.join(f"user:{user.id}", stream)


server.get("/api/events", events).use(in_db)


@server.get("/api/health")
def health(req: Request, res: Response) -> None:
    res.json({"ok": True, "service": "nexus-board", "version": VERSION})


# -- accounts -----------------------------------------------------------------------------

CREDENTIALS = [
    field("email").required().string().email().max(200),
    field("password").required().string().min(8).max(200),
]


def sign_in(req: Request, user_id: int) -> None:
    # A new session id at every sign-in: an id planted before it (fixation) is worth nothing.
    req.session.regenerate()
    req.session["user_id"] = user_id


@body([*CREDENTIALS, field("name").required().string().min(1).max(60)])
def register(req: Request, res: Response) -> None:
    doc = req.locals["body"]
    email, name = doc["email"].strip().lower(), doc["name"].strip()
    if not name:
        res.json_error(422, "a name is required")
        return
    password_hash = hash_password(doc["password"])  # before the first query: see `in_db`
    if User.exists(email=email):
        res.json_error(409, "that email is already registered")
        return
    user = User(email=email, name=name, password_hash=password_hash)
    commit()
    sign_in(req, user.id)
    res.status(201).json({"user": user.as_json()})


@body(CREDENTIALS)
def login(req: Request, res: Response) -> None:
    doc = req.locals["body"]
    with db_session:  # short: the connection goes back before the slow hash
        user = User.get(email=doc["email"].strip().lower())
        found = (user.id, user.password_hash, user.as_json()) if user is not None else None
    stored = found[1] if found is not None else unknown_user_hash()
    if not verify_password(doc["password"], stored) or found is None:
        res.json_error(401, "wrong email or password")
        return
    sign_in(req, found[0])
    res.json({"user": found[2]})


server.post("/api/auth/register", register).use(auth_limit).use(in_db)
server.post("/api/auth/login", login).use(auth_limit)


@server.post("/api/auth/logout")
def logout(req: Request, res: Response) -> None:
    req.session.destroy()
    res.send_status(204)


def me(req: Request, res: Response) -> None:
    user_id = req.session.get("user_id")
    user = User.get(id=user_id) if isinstance(user_id, int) else None
    if user is None:
        res.status(401).json({"user": None})
    else:
        res.json({"user": user.as_json()})


server.get("/api/auth/me", me).use(in_db)


@api("PATCH", "/profile")
@body([field("name").string().min(1).max(60), field("bio").string().max(300)])
def update_profile(req: Request, res: Response) -> None:
    user: User = req.locals["user"]
    doc = req.locals["body"]
    if "name" in doc and doc["name"].strip():
        user.name = doc["name"].strip()
    if "bio" in doc:
        user.bio = doc["bio"].strip()
    commit()
    announce_profile(user)
    res.json({"user": user.as_json()})


@api("POST", "/profile/avatar")
def upload_avatar(req: Request, res: Response) -> None:
    user: User = req.locals["user"]
    if not req.content_type.startswith("multipart/form-data"):
        res.json_error(415, "send the image as multipart/form-data, field 'avatar'")
        return
    upload = req.files(AVATAR_LIMITS).get("avatar")
    if upload is None or upload.size == 0:
        res.json_error(422, "no file in the 'avatar' field")
        return
    head = upload.read(16)
    extension = next((ext for sig, ext in IMAGE_SIGNATURES.items() if head.startswith(sig)), None)
    if extension is None and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        extension = ".webp"
    if extension is None:
        res.json_error(415, "the avatar must be a PNG, JPEG, GIF or WebP image")
        return
    # Written aside, then renamed: a reader never sees half an image.
    fd, partial = tempfile.mkstemp(dir=UPLOADS, prefix=".avatar-")
    os.close(fd)
    upload.save(partial)
    name = f"avatar_{user.id}_{os.urandom(4).hex()}{extension}"
    os.replace(partial, UPLOADS / name)
    previous, user.avatar = user.avatar, name
    commit()
    if previous:
        (UPLOADS / previous).unlink(missing_ok=True)
    announce_profile(user)
    res.json({"user": user.as_json()})


def announce_profile(user: User) -> None:
    """Everyone sharing a project with `user` sees the new name or face on the cards."""
    peers = select(m.id for p in Project for m in p.members if user in p.members)[:]
    announce(
        "profile",
        {"user": user.brief() | {"avatar_url": user.as_json()["avatar_url"]}},
        [user.id, *peers],
    )


@api("GET", "/stats")
def stats(req: Request, res: Response) -> None:
    user: User = req.locals["user"]
    by_status = dict.fromkeys(STATUSES, 0)
    for status, number in select((t.status, count(t)) for t in Task if user in t.project.members):
        by_status[status] = number
    res.json(
        {
            "projects": user.projects.count(),
            "tasks": sum(by_status.values()),
            "by_status": by_status,
            "comments": count(c for c in Comment if c.author == user),
        }
    )


# -- projects -----------------------------------------------------------------------------


def project_for(req: Request) -> Project:
    """The project named by the path, if the signed-in user is a member (else 404 or 403)."""
    project = Project[_id(req.params["id"])]
    if req.locals["user"] not in project.members:
        raise HTTPError(403, "you are not a member of this project")
    return project


def _id(text: str) -> int:
    if not text.isdigit():
        raise HTTPError(404, "not found")
    return int(text)


@api("GET", "/projects")
def list_projects(req: Request, res: Response) -> None:
    user: User = req.locals["user"]
    projects = user.projects.order_by(Project.id)[:]
    counts: dict[int, dict[str, int]] = {p.id: dict.fromkeys(STATUSES, 0) for p in projects}
    for project_id, status, number in select(
        (t.project.id, t.status, count(t)) for t in Task if user in t.project.members
    ):
        counts[project_id][status] = number
    res.json([project.as_json() | {"counts": counts[project.id]} for project in projects])


@api("POST", "/projects")
@body([field("name").required().string().min(1).max(80), field("description").string().max(500)])
def create_project(req: Request, res: Response) -> None:
    user: User = req.locals["user"]
    doc = req.locals["body"]
    if not doc["name"].strip():
        res.json_error(422, "a name is required")
        return
    project = Project(
        name=doc["name"].strip(),
        description=doc.get("description", "").strip(),
        owner=user,
        members=[user],
    )
    commit()
    data = project.as_json()
    announce("project", {"action": "created", "project": data}, [user.id])
    res.status(201).json(data)


@api("GET", "/projects/:id")
def get_project(req: Request, res: Response) -> None:
    res.json(project_for(req).as_json())


@api("DELETE", "/projects/:id")
def delete_project(req: Request, res: Response) -> None:
    project = project_for(req)
    if project.owner != req.locals["user"]:
        res.json_error(403, "only the owner may delete a project")
        return
    members, project_id = member_ids(project), project.id
    project.delete()
    commit()
    announce("project", {"action": "deleted", "project_id": project_id}, members)
    res.send_status(204)


@api("POST", "/projects/:id/members")
@body([field("email").required().string().email()])
def add_member(req: Request, res: Response) -> None:
    project = project_for(req)
    if project.owner != req.locals["user"]:
        res.json_error(403, "only the owner may add members")
        return
    newcomer = User.get(email=req.locals["body"]["email"].strip().lower())
    if newcomer is None:
        res.json_error(404, "no user with that email")
        return
    project.members.add(newcomer)
    commit()
    data = project.as_json()
    announce("project", {"action": "updated", "project": data}, member_ids(project))
    res.json(data)


# -- tasks and comments -------------------------------------------------------------------


def task_for(req: Request) -> Task:
    """The task named by the path, if the signed-in user is a member of its project."""
    task = Task[_id(req.params["id"])]
    if req.locals["user"] not in task.project.members:
        raise HTTPError(403, "you are not a member of this project")
    return task


@api("GET", "/projects/:id/tasks")
def list_tasks(req: Request, res: Response) -> None:
    project = project_for(req)
    status, text = req.query.get("status", ""), req.query.get("q", "").strip().lower()
    if status and status not in STATUSES:
        res.json_error(422, f"status must be one of {', '.join(STATUSES)}")
        return
    # PERF: columns, not entities: a board of 300 tasks answers in 20 ms instead of 100.
    rows = select(
        (t.id, t.title, t.description, t.status, t.created_by.id, t.created_by.name, t.updated_at)
        for t in Task
        if t.project == project
    )
    if status:
        rows = rows.where(lambda t: t.status == status)
    if text:
        rows = rows.where(lambda t: text in t.title.lower() or text in t.description.lower())
    comments = dict(select((c.task.id, count(c)) for c in Comment if c.task.project == project)[:])
    found = rows.order_by(1)[:]
    res.json(
        [
            {
                "id": task_id,
                "project_id": project.id,
                "title": title,
                "description": description or "",
                "status": task_status,
                "created_by": {"id": author_id, "name": author_name},
                "comments": comments.get(task_id, 0),
                "updated_at": stamp(updated_at),
            }
            for task_id, title, description, task_status, author_id, author_name, updated_at in (
                found
            )
        ]
    )


TASK_FIELDS = [
    field("title").string().min(1).max(200),
    field("description").string().max(2000),
    field("status").string().one_of(STATUSES),
]


@api("POST", "/projects/:id/tasks")
@body([*TASK_FIELDS, field("title").required()])
def create_task(req: Request, res: Response) -> None:
    project = project_for(req)
    doc = req.locals["body"]
    if not doc["title"].strip():
        res.json_error(422, "a title is required")
        return
    task = Task(
        project=project,
        title=doc["title"].strip(),
        description=doc.get("description", "").strip(),
        status=doc.get("status", "todo"),
        created_by=req.locals["user"],
    )
    commit()
    data = task.as_json(0)
    announce("task", {"action": "created", "task": data}, member_ids(project))
    res.status(201).json(data)


@api("PATCH", "/tasks/:id")
@body(TASK_FIELDS)
def update_task(req: Request, res: Response) -> None:
    task = task_for(req)
    doc = req.locals["body"]
    if "title" in doc and not doc["title"].strip():
        res.json_error(422, "a title cannot be blank")
        return
    changes = {key: doc[key].strip() for key in ("title", "description", "status") if key in doc}
    task.set(**changes)
    commit()
    data = task.as_json()
    announce("task", {"action": "updated", "task": data}, member_ids(task.project))
    res.json(data)


@api("DELETE", "/tasks/:id")
def delete_task(req: Request, res: Response) -> None:
    task = task_for(req)
    project, task_id = task.project, task.id
    task.delete()
    commit()
    payload = {"action": "deleted", "task_id": task_id, "project_id": project.id}
    announce("task", payload, member_ids(project))
    res.send_status(204)


@api("GET", "/tasks/:id/comments")
def list_comments(req: Request, res: Response) -> None:
    task = task_for(req)
    res.json([comment.as_json() for comment in task.comments.order_by(Comment.id)])


@api("POST", "/tasks/:id/comments")
@body([field("body").required().string().min(1).max(2000)])
def add_comment(req: Request, res: Response) -> None:
    task = task_for(req)
    text = req.locals["body"]["body"].strip()
    if not text:
        res.json_error(422, "a comment cannot be blank")
        return
    comment = Comment(task=task, author=req.locals["user"], body=text)
    commit()
    data = comment.as_json()
    announce(
        "comment",
        {"action": "created", "comment": data, "project_id": task.project.id},
        member_ids(task.project),
    )
    res.status(201).json(data)


def task_with_comments(task: Task) -> dict[str, object]:
    comments = [comment.as_json() for comment in task.comments.order_by(Comment.id)]
    return task.as_json(len(comments)) | {"comment_list": comments}


@api("GET", "/export/projects.json")
def export(req: Request, res: Response) -> None:
    user: User = req.locals["user"]
    projects = [
        project.as_json()
        | {"tasks": [task_with_comments(t) for t in project.tasks.order_by(Task.id)]}
        for project in user.projects.order_by(Project.id)
    ]
    res.set_header("Content-Disposition", content_disposition("nexus-export.json"))
    res.json({"exported_by": user.as_json(), "version": VERSION, "projects": projects})
