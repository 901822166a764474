"""Where a session lives between requests: a store, a signed cookie, or a JWT.

Each strategy turns a request into a `Session` (`load`) and a session into a cookie or token
on the response (`persist`); `socketify.state.sessions` decides when. Anything invalid loads as a
new empty session.

- **store**: the cookie is `<id>.<sig>`: 32 lowercase hex characters, then base64url (no
  padding) of HMAC-SHA256(secret, id), checked in constant time and split at the last `.`.
  The data is JSON in the store under `key_prefix + id`, for `ttl` seconds. A loaded
  session is written back with `compare_and_set` against the bytes it was loaded from,
  merging its own changes into a concurrent save (the rule is in `socketify.state.sessions`).
- **cookie**: the data travels in the cookie, signed and timestamped by itsdangerous (a
  cookie older than `ttl` is refused by the server too, not only by the browser). Over
  `max_cookie_size` bytes the response fails loudly instead of the browser silently dropping
  the cookie.
- **jwt**: HS256 only (the header's `alg` is never trusted), `exp` required, `nbf` and (when
  `jwt_issuer` is set) `iss` checked by PyJWT. `destroy()` and `regenerate()` put the old
  token's `jti` on a deny-list in the store until the token would have expired anyway
  (a logout or a new id revokes the old token).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from socketify.state.shared_store import SharedStore

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response
    from socketify.state.sessions import Session, SessionOptions
    from socketify.state.stores import Store

__all__ = [
    "DELETED",
    "SAVE_TRIES",
    "CookieStrategy",
    "JwtStrategy",
    "SessionTooLarge",
    "StoreStrategy",
    "Strategy",
]

log = logging.getLogger("socketify.error")

NewId = Callable[[], str]
# Compare-and-set attempts of one save before the last write simply wins. A retry takes some
# 15 us; with 32 clients hammering one session across two workers, saves took at most 6.
SAVE_TRIES = 32


class _Deleted:
    """What `Session.changes()` gives for a key the request removed."""

    def __repr__(self) -> str:
        return "DELETED"


DELETED: Any = _Deleted()
_RESERVED_CLAIMS = frozenset({"iat", "exp", "iss", "nbf", "jti"})
_DENY_PREFIX = "jwtdeny:"
_VERIFIED_MAX = 4096  # signed cookie values remembered per process (about 1 MB)


class SessionTooLarge(RuntimeError):
    """A cookie-carried session grew past what browsers keep; the request answers 500."""


class Strategy(Protocol):
    """Load a session from a request; write it onto a response."""

    def load(self, req: Request) -> Session: ...

    def persist(self, session: Session, res: Response) -> None: ...


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class _HmacSha256:
    """HMAC-SHA256 with the keyed pads hashed once (RFC 2104).

    PERF: `hmac.digest()` looks the digest up in OpenSSL 3 on every call (~9 us here); copying
    two pre-keyed hash states costs ~2 us, and this runs twice per request.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > 64:
            key = hashlib.sha256(key).digest()
        key = key.ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def digest(self, message: bytes) -> bytes:
        """HMAC-SHA256(key, message)."""
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def _decode_object(raw: bytes | str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class StoreStrategy:
    """Data in a `Store`, a signed id in the cookie."""

    def __init__(
        self,
        options: SessionOptions,
        store: Store,
        session_type: type[Session],
        new_id: NewId,
    ) -> None:
        self.options = options
        self.store = store
        self.session_type = session_type
        self.new_id = new_id
        secret = options.secret
        self._mac = _HmacSha256(secret.encode() if isinstance(secret, str) else secret)
        # PERF: a client sends the same cookie on every request; the HMAC of a value that
        # verified once is the same next time, so remember the values that did (never the
        # ones that did not: a flood of forged cookies must not evict the real ones).
        self._verified: dict[str, str] = {}
        self._headers: dict[str, tuple[str, str]] = {}  # Cookie header -> (cookie, id)
        self._ttl = float(options.ttl)
        self._cookie_name = options.cookie_name
        self._key_prefix = options.key_prefix
        self._store = store  # what the methods below use; `store` stays what was given
        if isinstance(store, SharedStore) and store.namespace:
            # PERF: the same keys, prefixed here once: a SharedStore with no namespace hands
            # `get` and `set` straight to its backend.
            self._key_prefix = store.namespace + self._key_prefix
            self._store = store.without_namespace()
        # A user's store may predate compare_and_set: it then gets plain sets.
        self._compare_and_set: Callable[..., bool] | None = getattr(
            self._store, "compare_and_set", None
        )

    def sign(self, sid: str) -> str:
        """`<id>.<base64url HMAC-SHA256(secret, id)>`."""
        return f"{sid}.{_b64(self._mac.digest(sid.encode()))}"

    def verify(self, value: str) -> str | None:
        """The id of a signed cookie value, or None if the signature does not match."""
        sid = self._verified.get(value)
        if sid is not None:
            return sid
        sid, dot, _ = value.rpartition(".")
        if not dot or len(sid) != 32:
            return None
        if not hmac.compare_digest(self.sign(sid), value):
            return None
        if len(self._verified) >= _VERIFIED_MAX:
            self._verified.clear()
        self._verified[value] = sid
        return sid

    def load(self, req: Request) -> Session:
        """The stored session named by the cookie, or a new one."""
        # PERF: a client sends the same Cookie header again and again: remember which
        # session cookie (and id) a header carried once it verified, and skip parsing it.
        raw_header = req.header("cookie")
        if raw_header:
            known = self._headers.get(raw_header) or self._from_header(req, raw_header)
            if known is not None:
                cookie, sid = known
                raw = self._store.get(self._key_prefix + sid)
                if raw is not None:
                    try:
                        data = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        data = None
                    if data.__class__ is dict:
                        # The cookie is re-sent as is while the id stays.
                        return self.session_type.loaded(sid, data, raw, cookie)
        return self.session_type(self.new_id())

    def _from_header(self, req: Request, raw_header: str) -> tuple[str, str] | None:
        """``(session cookie, id)`` from a Cookie header not seen before; None if it has no
        session cookie or the cookie does not verify."""
        cookie = req.cookies.get(self._cookie_name)
        sid = self.verify(cookie) if cookie else None
        if cookie is None or sid is None:
            return None
        # Only a header that is one line for sure (repeated Cookie lines are joined with ", ")
        # is remembered: the same text then always parses to the same cookie.
        if ", " not in raw_header:
            if len(self._headers) >= _VERIFIED_MAX:
                self._headers.clear()
            self._headers[raw_header] = (cookie, sid)
        return cookie, sid

    def persist(self, session: Session, res: Response) -> None:
        """Save or delete the stored data; set or clear the cookie."""
        destroyed = session.destroyed
        previous = session.take_previous()
        if previous or destroyed:
            self._revoke(previous, session.id if destroyed else None, res)
            if destroyed:
                return
        # PERF: a loaded session that was changed is saved (the usual case), asked directly.
        if (session.dirty and not session.is_new) or session.wants_saving(self.options):
            if not self._save(session):
                return  # destroyed by another request meanwhile: it stays gone
            value = session.cookie_value
            if value is None or not value.startswith(session.id):
                value = self.sign(session.id)
            res.add_header("Set-Cookie", self.options.cookie_line(value))

    def _save(self, session: Session) -> bool:
        """Write the session back, merging into a concurrent save; False if it is gone."""
        key = self._key_prefix + session.id
        value = session.encode()
        expected = session.loaded_raw
        if self._compare_and_set is None or session.is_new or expected is None:
            self._store.set(key, value, self._ttl)
            return True
        changes: dict[str, Any] | None = None
        for _ in range(SAVE_TRIES):
            if self._compare_and_set(key, expected, value, self._ttl):
                return True
            current = self._store.get(key)
            if current is None:
                return False
            if changes is None:
                changes = session.changes()
            if not changes:
                return True  # nothing of ours to write; the other save extended it too
            merged = _decode_object(current) or {}
            for name, changed in changes.items():
                if changed is DELETED:
                    merged.pop(name, None)
                else:
                    merged[name] = changed
            expected, value = current, orjson.dumps(merged)
        log.warning(
            "session %s… changed by %d other requests while one was saving it; saving that "
            "one's changes over theirs",
            session.id[:8],
            SAVE_TRIES,
        )
        self._store.set(key, value, self._ttl)
        return True

    def _revoke(
        self, previous: Sequence[tuple[str, float | None]], destroyed: str | None, res: Response
    ) -> None:
        """Delete the data of the ids the session had before, or of a destroyed session."""
        prefix = self._key_prefix
        for old_id, _ in previous:
            self._store.delete(prefix + old_id)
        if destroyed is not None:
            self._store.delete(prefix + destroyed)
            self.options.clear_cookie(res)


class CookieStrategy:
    """The data itself in a signed, timestamped cookie (itsdangerous)."""

    def __init__(self, options: SessionOptions, session_type: type[Session], new_id: NewId) -> None:
        from itsdangerous import URLSafeTimedSerializer

        self.options = options
        self.session_type = session_type
        self.new_id = new_id
        self._serializer = URLSafeTimedSerializer(options.secret, salt="socketify.session")

    def load(self, req: Request) -> Session:
        """The session sealed in the cookie, or a new one."""
        from itsdangerous import BadData

        opts = self.options
        cookie = req.cookies.get(opts.cookie_name)
        if cookie:
            try:
                payload = self._serializer.loads(cookie, max_age=opts.ttl)
            except BadData:
                payload = None
            if isinstance(payload, dict):
                sid, data = payload.get("i"), payload.get("d")
                if isinstance(sid, str) and isinstance(data, dict):
                    return self.session_type(sid, data, is_new=False, raw=orjson.dumps(data))
        return self.session_type(self.new_id())

    def persist(self, session: Session, res: Response) -> None:
        """Seal the data into the cookie (or clear it)."""
        opts = self.options
        session.take_previous()  # nothing server-side to revoke
        if session.destroyed:
            opts.clear_cookie(res)
            return
        if session.wants_saving(opts):
            opts.cookie(res, self._serializer.dumps({"i": session.id, "d": session.data()}))


class JwtStrategy:
    """The data in an HS256 JWT, from `Authorization: Bearer` and/or the cookie."""

    def __init__(
        self,
        options: SessionOptions,
        store: Store,
        session_type: type[Session],
        new_id: NewId,
    ) -> None:
        import jwt

        self._jwt = jwt
        self.options = options
        self.store = store
        self.session_type = session_type
        self.new_id = new_id

    def _token(self, req: Request) -> str | None:
        opts = self.options
        if opts.jwt_transport in ("bearer", "both"):
            header = req.header("Authorization").strip()
            if header[:7].lower() == "bearer ":
                token = header[7:].strip()
                if token:
                    return token
        if opts.jwt_transport in ("cookie", "both"):
            return req.cookies.get(opts.cookie_name) or None
        return None

    def load(self, req: Request) -> Session:
        """The session carried by a valid, unrevoked token, or a new one."""
        opts = self.options
        token = self._token(req)
        if token is None or token.count(".") != 2:
            return self.session_type(self.new_id())
        try:
            claims = self._jwt.decode(
                token,
                opts.secret,
                algorithms=["HS256"],
                issuer=opts.jwt_issuer or None,
                options={"require": ["exp"]},
            )
        except self._jwt.PyJWTError:
            return self.session_type(self.new_id())
        jti = claims.get("jti")
        if isinstance(jti, str) and self.store.get(_DENY_PREFIX + jti) is not None:
            return self.session_type(self.new_id())  # revoked by destroy() or regenerate()
        data = claims.get(opts.jwt_data_claim)
        if not isinstance(data, dict):
            data = {k: v for k, v in claims.items() if k not in _RESERVED_CLAIMS}
        sid = jti if isinstance(jti, str) else self.new_id()
        exp = claims.get("exp")
        expires_at = float(exp) if isinstance(exp, int | float) else None
        return self.session_type(
            sid, data, is_new=False, raw=orjson.dumps(data), expires_at=expires_at
        )

    def persist(self, session: Session, res: Response) -> None:
        """Revoke replaced tokens; issue a fresh token (or clear the cookie)."""
        opts = self.options
        now = time.time()
        for old_id, expires_at in session.take_previous():
            left = (expires_at - now) if expires_at is not None else float(opts.ttl)
            if left > 0:
                self.store.set(_DENY_PREFIX + old_id, b"1", left + 1.0)
        if session.destroyed:
            if opts.jwt_transport != "bearer":
                opts.clear_cookie(res)  # once, even for "both"
            return
        if not session.wants_saving(opts):
            return
        issued = int(now)
        claims: dict[str, Any] = {
            "jti": session.id,
            opts.jwt_data_claim: session.data(),
            "iat": issued,
            "exp": issued + int(opts.ttl),
        }
        if opts.jwt_issuer:
            claims["iss"] = opts.jwt_issuer
        token = self._jwt.encode(claims, opts.secret, algorithm="HS256")
        if opts.jwt_transport in ("cookie", "both"):
            opts.cookie(res, token)
        if opts.jwt_transport in ("bearer", "both"):
            res.set_header("X-Access-Token", token)
