"""Sessions: `server.use(sessions.middleware(secret=...))`, then `req.session`.

    server.use(sessions.middleware(secret=os.environ["SESSION_SECRET"]))   # store strategy

    @server.post("/cart")
    def add(req, res):
        req.session["cart"] = [*req.session.get("cart", []), req.json()["item"]]
        res.json({"id": req.session.id, "items": len(req.session["cart"])})

Theory of operation. The middleware is a pair of hooks (`socketify.core.chain.hooked`): the
`before` hook, in place of code before `next()`, loads the session named by the request
(a signed id cookie, a signed cookie holding the data, or a JWT; see
`socketify.state.session_strategies`); anything missing, forged, expired or revoked gives a brand
new empty session, never an error. The `after` hook, once the rest of the chain has
returned (the response is still writable: it is serialized only once the chain is done),
persists the session when something calls for it (below) and sets the cookie or token. It
also persists when the handler raised: what the handler changed before the error is kept
and the error still becomes the error answer.

A session is persisted when it is dirty, regenerated, touched, new with data, new with
`save_uninitialized`, or existing with `rolling` — but a new empty session is never persisted
unless `save_uninitialized` or `regenerate()` asks for it. Data nested in the session (a list
appended to in place) counts as a change too: with `rolling=False` the data is compared with
what was loaded.

The store strategy's default store is `socketify.state.shared_store.SharedStore`, the store shared
by every worker of the server (or every host, with `SOCKETIFY_STATE_URL=redis://...`): a
session saved while answering one request is there for the next request on any worker, and
outlives the worker that wrote it. The shared-memory store keeps a session of up to 4 KiB of
JSON (with the default `key_prefix`) in memory every worker reads and writes directly; a
larger one (or one whose slots are all taken) goes through the master's process, slower but
kept all the same. The two together are bounded: only when both are full are the sessions
written longest ago evicted (a session always has a TTL, so it may be), which is what a
flood of anonymous requests runs into.

Concurrent requests on one session (store strategy). Each request writes back only the
keys it changed: the ones it set or deleted (`session[k] = v`, `del session[k]`, `clear()`)
and the ones whose value differs from what it loaded (data changed in place). The write is
a compare-and-set against the bytes the request loaded; when another request saved the
session meanwhile, it reads the session again, applies its own changes to that and tries
again (up to `SAVE_TRIES` times, then it saves its version as it is and logs a warning).
So two requests that change different keys both keep their change, and of two that change
the same key the last one to save wins. A counter kept in the session therefore loses
increments under concurrency: count with the store's own `incr` instead (one atomic step).
A session another request destroyed meanwhile stays destroyed. A custom store without
`compare_and_set` is written with a plain `set`: the whole session, last writer wins.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from socketify.core.chain import hooked
from socketify.core.cookies import build_set_cookie
from socketify.state.session_strategies import (
    DELETED,
    SAVE_TRIES,
    CookieStrategy,
    JwtStrategy,
    SessionTooLarge,
    StoreStrategy,
    Strategy,
)
from socketify.state.shared_store import SharedStore
from socketify.state.stores import Store

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = [
    "DELETED",
    "SAVE_TRIES",
    "Session",
    "SessionOptions",
    "SessionTooLarge",
    "get",
    "middleware",
    "new_id",
]

log = logging.getLogger("socketify.error")

Next = Callable[[], None]

_STRATEGIES = {
    "store": "store",
    "server_store": "store",
    "serverstore": "store",
    "cookie": "cookie",
    "signed_cookie": "cookie",
    "signedcookie": "cookie",
    "jwt": "jwt",
}
_TRANSPORTS = ("cookie", "bearer", "both")
_SAME_SITE = {"lax": "Lax", "strict": "Strict", "none": "None"}


def new_id() -> str:
    """A session id: 32 lowercase hex characters (16 random bytes)."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class SessionOptions:
    """Every option of `middleware()`, checked once at construction."""

    secret: str
    strategy: str = "store"
    store: Store | None = None
    cookie_name: str = "sid"
    ttl: int = 86400
    rolling: bool = True
    save_uninitialized: bool = False
    cookie_secure: bool = False
    cookie_http_only: bool = True
    same_site: str = "Lax"
    cookie_path: str = "/"
    cookie_domain: str | None = None
    jwt_transport: str = "both"
    jwt_issuer: str = ""
    jwt_data_claim: str = "data"
    max_cookie_size: int = 4096
    key_prefix: str = "sess:"
    # With the default store on Redis: at most this many stored sessions (the soonest to
    # expire go first). The shared-memory store is bounded by its own size.
    max_sessions: int = 1_000_000

    def __post_init__(self) -> None:
        if not isinstance(self.secret, str | bytes) or not self.secret:
            raise ValueError("sessions need a non-empty secret")
        strategy = _STRATEGIES.get(str(self.strategy).lower().replace("-", "_"))
        if strategy is None:
            raise ValueError(f"unknown session strategy {self.strategy!r}: store, cookie or jwt")
        object.__setattr__(self, "strategy", strategy)
        transport = str(self.jwt_transport).lower()
        if transport not in _TRANSPORTS:
            raise ValueError(f"jwt_transport must be one of {_TRANSPORTS}, not {transport!r}")
        object.__setattr__(self, "jwt_transport", transport)
        same_site = _SAME_SITE.get(str(self.same_site).lower())
        if same_site is None:
            raise ValueError("same_site must be Lax, Strict or None")
        object.__setattr__(self, "same_site", same_site)
        if same_site == "None" and not self.cookie_secure:
            log.warning("SameSite=None cookies are refused by browsers without cookie_secure")
        if not self.ttl > 0:
            raise ValueError("ttl must be a positive number of seconds")
        if not (isinstance(self.max_sessions, int) and self.max_sessions > 0):
            raise ValueError("max_sessions must be a positive number of sessions")
        _ = self._attributes  # an invalid cookie name, path or domain fails here, at start-up

    def cookie(self, res: Response, value: str) -> None:
        """Set the session cookie with these options (`SessionTooLarge` past the limit)."""
        res.add_header("Set-Cookie", self.cookie_line(value))

    def cookie_line(self, value: str) -> str:
        """The Set-Cookie line of the session cookie (`SessionTooLarge` past the limit)."""
        line = f"{self.cookie_name}={value}{self._attributes}"
        if len(line) > self.max_cookie_size:
            raise SessionTooLarge(
                f"the {self.cookie_name!r} session cookie is {len(line)} bytes, over the "
                f"{self.max_cookie_size}-byte limit browsers keep; store less in the session "
                "or use the store strategy"
            )
        return line

    @functools.cached_property
    def _attributes(self) -> str:
        # PERF: the attributes never change; build (and validate) them once, not per request.
        line = build_set_cookie(
            self.cookie_name,
            "v",
            max_age=int(self.ttl),
            path=self.cookie_path,
            domain=self.cookie_domain,
            secure=self.cookie_secure,
            http_only=self.cookie_http_only,
            same_site=self.same_site,
        )
        return line[len(self.cookie_name) + 2 :]

    def clear_cookie(self, res: Response) -> None:
        """Send the expiring cookie that deletes the session cookie."""
        res.clear_cookie(self.cookie_name, path=self.cookie_path, domain=self.cookie_domain)


class Session(MutableMapping[str, Any]):
    """The request's session: a dict of JSON values plus `id`, `is_new` and life-cycle calls."""

    __slots__ = (
        "_changed",
        "_data",
        "_destroyed",
        "_dirty",
        "_previous",
        "_raw",
        "_regenerated",
        "_touched",
        "cookie_value",
        "expires_at",
        "id",
        "is_new",
    )

    def __init__(
        self,
        sid: str,
        data: dict[str, Any] | None = None,
        *,
        is_new: bool = True,
        raw: bytes | None = None,
        expires_at: float | None = None,
    ) -> None:
        self.id = sid
        self.is_new = is_new
        self._data: dict[str, Any] = data if data is not None else {}
        self._raw = raw  # the data as loaded, to notice changes made in place
        self.expires_at = expires_at  # JWT: when the token that carried it expires
        self.cookie_value: str | None = None  # the signed cookie it came with (store strategy)
        self._dirty = False
        self._destroyed = False
        self._regenerated = False
        self._touched = False
        self._previous: list[tuple[str, float | None]] = []  # identities to revoke
        self._changed: set[str] | None = None  # keys set or deleted by this request

    @classmethod
    def loaded(cls, sid: str, data: dict[str, Any], raw: bytes, cookie_value: str) -> Session:
        """An existing session as a store strategy loads it (`raw`: its stored JSON)."""
        session = cls(sid, data, is_new=False, raw=raw)
        session.cookie_value = cookie_value
        return session

    # -- the mapping ----------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value
        self._dirty = True
        if self._changed is None:
            self._changed = {key}
        else:
            self._changed.add(key)

    def __delitem__(self, key: str) -> None:
        del self._data[key]
        self._dirty = True
        if self._changed is None:
            self._changed = {key}
        else:
            self._changed.add(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # PERF: the Mapping mixins would go through __getitem__ and catch KeyError; the dict
    # answers directly.
    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key`, or `default` (None: JSON null) when absent."""
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def has(self, key: str) -> bool:
        """True when `key` is in the session."""
        return key in self._data

    def set(self, key: str, value: Any) -> None:
        """`session[key] = value`."""
        self[key] = value

    def erase(self, key: str) -> bool:
        """Remove `key`; True when it was there."""
        if key not in self._data:
            return False
        del self[key]
        return True

    def clear(self) -> None:
        """Remove every key."""
        if self._data:
            self._changed = {*(self._changed or ()), *self._data}
            self._data.clear()
            self._dirty = True

    def data(self) -> dict[str, Any]:
        """The session's data (the live dict)."""
        return self._data

    # -- life cycle -----------------------------------------------------------------------

    def destroy(self) -> None:
        """End the session: its stored data, cookie and (JWT) token are revoked."""
        if not self.is_new:
            self._previous.append((self.id, self.expires_at))
        self._destroyed = True

    def regenerate(self) -> None:
        """Keep the data under a new id; the old id (or token) stops working."""
        if not self.is_new or self._regenerated:
            self._previous.append((self.id, self.expires_at))
        self.id = new_id()
        self.is_new = True
        self._regenerated = True
        self._dirty = True
        self._touched = True
        self._destroyed = False

    def touch(self) -> None:
        """Persist (and extend) the session even if nothing changed."""
        self._touched = True

    @property
    def destroyed(self) -> bool:
        """Whether `destroy()` was called."""
        return self._destroyed

    @property
    def dirty(self) -> bool:
        """Whether a key was set or deleted (data changed in place is not seen here)."""
        return self._dirty

    @property
    def loaded_raw(self) -> bytes | None:
        """The stored bytes this session was loaded from (None for a new session)."""
        return self._raw

    def take_previous(self) -> Sequence[tuple[str, float | None]]:
        """The ids (and JWT expiries) this session had before, to revoke; forgets them."""
        previous = self._previous
        if not previous:
            return ()
        self._previous = []
        return previous

    def changes(self) -> dict[str, Any]:
        """What this request changed since the session was loaded: each key it set, deleted
        or changed in place, with its value now (`DELETED` for a removed key)."""
        loaded = _loads_object(self._raw) if self._raw is not None else {}
        changed = self._changed or set()
        data = self._data
        out: dict[str, Any] = {
            key: value
            for key, value in data.items()
            if key in changed or key not in loaded or loaded[key] != value
        }
        for key in (*loaded, *changed):
            if key not in data:
                out[key] = DELETED
        return out

    def encode(self) -> bytes:
        """The data as JSON (what the store strategy saves)."""
        return orjson.dumps(self._data)

    def wants_saving(self, options: SessionOptions) -> bool:
        """The persist rule of the module docstring."""
        if self.is_new and not self._data and not options.save_uninitialized:
            return self._regenerated
        if self._dirty or self._regenerated or self._touched:
            return True
        if self.is_new:
            return options.save_uninitialized or bool(self._data)
        if options.rolling:
            return True
        return self._raw is not None and self.encode() != self._raw

    def __repr__(self) -> str:
        return f"<Session {self.id} {'new ' if self.is_new else ''}{len(self._data)} keys>"


def _loads_object(raw: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def get(req: Request) -> Session | None:
    """The request's session, or None if the sessions middleware did not run."""
    session = req.locals.get("session")
    return session if isinstance(session, Session) else None


def middleware(secret: str, strategy: str = "store", **options: Any) -> Callable[..., None]:
    """Load `req.session` before the handler and persist it after (`SessionOptions`)."""
    opts = SessionOptions(secret=secret, strategy=strategy, **options)
    store: Store = (
        opts.store
        if opts.store is not None
        else SharedStore(max_entries=opts.max_sessions, bounded_prefix=opts.key_prefix)
    )
    impl: Strategy
    if opts.strategy == "store":
        impl = StoreStrategy(opts, store, Session, new_id)
    elif opts.strategy == "cookie":
        impl = CookieStrategy(opts, Session, new_id)
    else:
        impl = JwtStrategy(opts, store, Session, new_id)

    load = impl.load
    persist = impl.persist

    def sessions_load(req: Request, res: Response) -> bool:
        req.locals["session"] = load(req)
        return True

    def sessions_persist(req: Request, res: Response, error: BaseException | None) -> None:
        session = req.locals["session"]
        if error is None:
            persist(session, res)
        elif isinstance(error, Exception):
            # What the handler changed before failing is kept; the handler's
            # error, not a failure to save, is what the client hears about.
            try:
                persist(session, res)
            except Exception:
                log.exception("could not save the session of a failed request")

    return hooked(sessions_load, sessions_persist, name="sessions_middleware")
