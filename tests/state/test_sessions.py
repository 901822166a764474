"""Sessions behaviour by behaviour: store, cookie and JWT strategies, where destroy() and
regenerate() revoke the old JWT, changes made before an error are kept, and concurrent saves
merge."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any

import jwt
import orjson
import pytest

from socketify import HTTPError, Server
from socketify.state import sessions
from socketify.state.stores import MemoryStore
from socketify.testing import TestClient
from workers.shared.kvstore import KeyValueStore
from workers.shared.state import LocalState

SECRET = "s3cret-" * 6  # 36 bytes: PyJWT warns below 32


def make(**options: Any) -> tuple[TestClient, LocalState]:
    store = LocalState()
    server = Server()
    if options.get("strategy", "store") != "cookie":
        options.setdefault("store", store)
    server.use(sessions.middleware(secret=SECRET, **options))

    @server.get("/set/:k/:v")
    def set_value(req, res):
        req.session[req.params["k"]] = req.params["v"]
        res.json({"id": req.session.id, "new": req.session.is_new})

    @server.get("/get/:k")
    def get_value(req, res):
        res.json({"v": req.session.get(req.params["k"]), "new": req.session.is_new})

    @server.get("/nothing")
    def nothing(req, res):
        res.send("ok")

    @server.get("/append")
    def append(req, res):
        req.session.data().setdefault("items", []).append(1)  # in place: not marked dirty
        res.json(len(req.session["items"]))

    @server.get("/destroy")
    def destroy(req, res):
        req.session.destroy()
        res.send("bye")

    @server.get("/regenerate")
    def regenerate(req, res):
        old = req.session.id
        req.session.regenerate()
        res.json({"old": old, "new": req.session.id})

    @server.get("/big")
    def big(req, res):
        req.session["blob"] = secrets.token_hex(2600)  # random: itsdangerous compresses
        res.send("ok")

    @server.get("/fail")
    def fail(req, res):
        req.session["before_error"] = True
        raise HTTPError(409, "conflict")

    return TestClient(server), store


def test_empty_secret_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="secret"):
        sessions.middleware(secret="")


def test_store_cookie_is_id_dot_hmac_with_the_spec_attributes() -> None:
    client, store = make()
    response = client.get("/set/a/1")
    line = response.headers.get("Set-Cookie")
    value = line.split(";")[0].split("=", 1)[1]
    sid, sig = value.rsplit(".", 1)
    mac = hmac.new(SECRET.encode(), sid.encode(), hashlib.sha256).digest()
    assert len(sid) == 32 and sid == sid.lower()
    assert sig == base64.urlsafe_b64encode(mac).rstrip(b"=").decode() and len(sig) == 43
    assert line == f"sid={value}; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax"
    assert store.get("sess:" + sid) == b'{"a":"1"}'


def test_a_new_empty_session_is_never_persisted() -> None:
    client, store = make()
    assert client.get("/nothing").headers.get("Set-Cookie") is None
    assert store.count_prefix("sess:") == 0
    client, _ = make(save_uninitialized=True)
    assert client.get("/nothing").headers.get("Set-Cookie") is not None


def test_the_session_is_read_back_and_rolling_resends_the_cookie() -> None:
    client, _ = make()
    client.get("/set/a/1")
    response = client.get("/get/a")
    assert response.json() == {"v": "1", "new": False}
    assert response.headers.get("Set-Cookie") is not None  # rolling: re-saved every time
    client, _ = make(rolling=False)
    client.get("/set/a/1")
    assert client.get("/get/a").headers.get("Set-Cookie") is None


def test_rolling_resends_the_same_cookie_and_extends_the_stored_data_every_time() -> None:
    clock = [1000.0]
    store = LocalState(KeyValueStore(lambda: clock[0]))
    client, _ = make(store=store, ttl=100)
    first = client.get("/set/a/1").headers["Set-Cookie"]
    sid = first.split("=", 1)[1].split(".", 1)[0]
    for _ in range(3):  # each read-only request re-saves: the data outlives the first ttl
        clock[0] += 60
        assert client.get("/get/a").headers["Set-Cookie"] == first
    assert store.get("sess:" + sid) == b'{"a":"1"}'
    clock[0] += 101  # nothing for longer than ttl: gone
    assert store.get("sess:" + sid) is None


def test_without_rolling_an_unchanged_session_is_neither_resent_nor_extended() -> None:
    clock = [1000.0]
    store = LocalState(KeyValueStore(lambda: clock[0]))
    client, _ = make(store=store, ttl=100, rolling=False)
    client.get("/set/a/1")
    clock[0] += 60
    assert client.get("/get/a").headers.get("Set-Cookie") is None
    clock[0] += 60  # 120 s after the only save: expired although it was read at 60 s
    assert client.get("/get/a").json() == {"v": None, "new": True}


def test_data_changed_in_place_is_saved_even_without_rolling() -> None:
    client, _ = make(rolling=False)
    client.get("/set/a/1")
    assert client.get("/append").json() == 1
    assert client.get("/append").json() == 2


def test_a_forged_or_unknown_cookie_gives_a_new_session() -> None:
    client, _ = make()
    client.get("/set/a/1")
    sid = client.cookies["sid"]
    client.cookies["sid"] = sid[:-1] + ("A" if sid[-1] != "A" else "B")
    assert client.get("/get/a").json() == {"v": None, "new": True}
    client.cookies["sid"] = "0" * 32 + "." + sid.rsplit(".", 1)[1]
    assert client.get("/get/a").json()["new"]


def test_destroy_deletes_the_data_and_expires_the_cookie_once() -> None:
    client, store = make()
    client.get("/set/a/1")
    sid = client.cookies["sid"].split(".")[0]
    response = client.get("/destroy")
    lines = response.headers.getall("Set-Cookie")
    assert lines == ["sid=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT"]
    assert store.get("sess:" + sid) is None


def test_regenerate_keeps_the_data_under_a_new_id_and_drops_the_old_one() -> None:
    client, store = make()
    client.get("/set/a/1")
    ids = client.get("/regenerate").json()
    assert ids["old"] != ids["new"]
    assert store.get("sess:" + ids["old"]) is None
    assert client.get("/get/a").json() == {"v": "1", "new": False}


def test_changes_made_before_an_error_are_kept() -> None:
    client, _ = make()
    client.get("/set/a/1")
    assert client.get("/fail").status == 409
    assert client.get("/get/before_error").json()["v"] is True


def test_cookie_strategy_round_trips_and_refuses_tampering() -> None:
    client, _ = make(strategy="cookie")
    first = client.get("/set/a/1").json()
    assert client.get("/get/a").json() == {"v": "1", "new": False}
    assert client.get("/set/b/2").json()["id"] == first["id"]  # a stable identity
    client.cookies["sid"] = client.cookies["sid"][:-2] + "xx"
    assert client.get("/get/a").json() == {"v": None, "new": True}


def test_cookie_strategy_over_4096_bytes_is_a_logged_500_not_a_dropped_cookie() -> None:
    client, _ = make(strategy="cookie")
    response = client.get("/big")
    assert response.status == 500
    assert response.headers.get("Set-Cookie") is None


def test_cookie_strategy_regenerate_changes_the_identity() -> None:
    client, _ = make(strategy="cookie")
    client.get("/set/a/1")
    ids = client.get("/regenerate").json()
    assert ids["old"] != ids["new"]


def jwt_client(**options: Any) -> tuple[TestClient, LocalState]:
    return make(strategy="jwt", **options)


def test_jwt_is_hs256_with_jti_data_iat_exp_in_cookie_and_header() -> None:
    client, _ = jwt_client(jwt_issuer="me")
    response = client.get("/set/a/1")
    token = response.headers.get("X-Access-Token")
    assert client.cookies["sid"] == token
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], issuer="me")
    assert claims["data"] == {"a": "1"} and claims["exp"] - claims["iat"] == 86400
    assert claims["jti"] == response.json()["id"]


def test_jwt_bearer_is_read_first_and_alg_none_expired_nbf_and_iss_are_refused() -> None:
    client, _ = jwt_client(jwt_issuer="me")
    token = client.get("/set/a/1").headers.get("X-Access-Token")
    client.cookies.clear()
    auth = {"Authorization": f"bEaReR {token}"}
    assert client.get("/get/a", headers=auth).json() == {"v": "1", "new": False}
    now = int(time.time())
    bad = [
        jwt.encode({"data": {"a": "x"}, "exp": now + 60, "iss": "me"}, None, algorithm="none"),
        jwt.encode({"data": {"a": "x"}, "exp": now - 1, "iss": "me"}, SECRET),
        jwt.encode({"data": {"a": "x"}, "exp": now + 60, "nbf": now + 30, "iss": "me"}, SECRET),
        jwt.encode({"data": {"a": "x"}, "exp": now + 60, "iss": "other"}, SECRET),
        jwt.encode({"data": {"a": "x"}, "iss": "me"}, SECRET),  # no exp
    ]
    for token in bad:
        response = client.get("/get/a", headers={"Authorization": f"Bearer {token}"})
        assert response.json() == {"v": None, "new": True}, token


def test_jwt_destroy_and_regenerate_revoke_the_old_token() -> None:
    client, _ = jwt_client(jwt_transport="bearer")
    token = client.get("/set/a/1").headers.get("X-Access-Token")
    auth = {"Authorization": f"Bearer {token}"}
    renewed = client.get("/regenerate", headers=auth).headers.get("X-Access-Token")
    assert client.get("/get/a", headers=auth).json()["new"]  # the old token is revoked
    auth = {"Authorization": f"Bearer {renewed}"}
    assert client.get("/get/a", headers=auth).json() == {"v": "1", "new": False}
    response = client.get("/destroy", headers=auth)
    assert response.headers.get("Set-Cookie") is None  # bearer-only: no cookie to clear
    assert client.get("/get/a", headers=auth).json()["new"]


def test_jwt_destroy_with_both_transports_clears_the_cookie_once() -> None:
    client, _ = jwt_client()
    client.get("/set/a/1")
    assert len(client.get("/destroy").headers.getall("Set-Cookie")) == 1


def test_session_reads_answer_from_the_data_and_only_writes_mark_it_dirty() -> None:
    session = sessions.Session("a" * 32, {"n": 1, "none": None}, is_new=False, raw=b"{}")
    assert session.get("n") == 1 and session.get("missing") is None
    assert session.get("missing", 0) == 0 and session.get("none", 5) is None
    assert "n" in session and "missing" not in session and 1 not in session
    assert not session._dirty
    session["n"] = 2
    assert session._dirty and session.data() == {"n": 2, "none": None}


# -- concurrent requests on one session ------------------------------------------------------


def interleaved(store: Any, *paths: str, save_uninitialized: bool = False) -> TestClient:
    """Run `paths` at once on one session: every request loads it before any saves it."""
    import gevent

    server = Server()
    server.use(sessions.middleware(secret=SECRET, store=store))
    arrived = gevent.event.Event()
    waiting = [len(paths)]

    @server.get("/start")
    def start(req, res):
        req.session["since"] = "start"
        req.session["cart"] = []
        res.send("ok")

    @server.get("/set/:k/:v")
    def set_value(req, res):
        req.session[req.params["k"]] = req.params["v"]
        wait_for_the_others()
        res.send("ok")

    @server.get("/del/:k")
    def delete_value(req, res):
        del req.session[req.params["k"]]
        wait_for_the_others()
        res.send("ok")

    @server.get("/append/:v")
    def append(req, res):
        req.session["cart"].append(req.params["v"])  # in place: not a recorded set
        wait_for_the_others()
        res.send("ok")

    @server.get("/destroy")
    def destroy(req, res):
        req.session.destroy()
        wait_for_the_others()
        res.send("ok")

    @server.get("/show")
    def show(req, res):
        res.json({"data": dict(req.session), "new": req.session.is_new})

    def wait_for_the_others() -> None:
        waiting[0] -= 1
        if not waiting[0]:
            arrived.set()
        arrived.wait(5)

    first = TestClient(server)
    first.get("/start")
    clients = []
    for path in paths:
        client = TestClient(server)
        client.cookies.update(first.cookies)
        clients.append(gevent.spawn(client.get, path))
    gevent.joinall(clients, raise_error=True)
    return first


def test_concurrent_requests_that_change_different_keys_both_keep_their_change() -> None:
    client = interleaved(LocalState(), "/set/a/1", "/set/b/2", "/append/x", "/del/since")
    assert client.get("/show").json()["data"] == {"a": "1", "b": "2", "cart": ["x"]}


def test_of_two_concurrent_requests_changing_one_key_the_last_to_save_wins() -> None:
    client = interleaved(LocalState(), "/set/a/first", "/set/a/second", "/set/b/2")
    data = client.get("/show").json()["data"]
    assert data["a"] in ("first", "second") and data["b"] == "2"


def test_a_session_destroyed_meanwhile_is_not_brought_back_by_another_request() -> None:
    client = interleaved(LocalState(), "/destroy", "/set/a/1")
    assert client.get("/show").json() == {"data": {}, "new": True}


class PlainStore:
    """A user's store written before compare_and_set existed."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self.inner.set(key, value, ttl)

    def delete(self, key: str) -> bool:
        return self.inner.delete(key)


def test_a_store_without_compare_and_set_gets_the_whole_session_last_writer_wins() -> None:
    client = interleaved(PlainStore(), "/set/a/1", "/set/b/2")
    data = client.get("/show").json()["data"]
    assert ("a" in data) != ("b" in data)  # one request's whole session replaced the other's


class ContendedStore(MemoryStore):
    """A store where some other request saves the session before every compare-and-set."""

    def compare_and_set(
        self, key: str, expected: bytes | None, value: bytes, ttl: float | None = None
    ) -> bool:
        current = orjson.loads(self.get(key) or b"{}")
        current["other"] = current.get("other", 0) + 1
        self.set(key, orjson.dumps(current), ttl)
        return super().compare_and_set(key, expected, value, ttl)


def test_a_save_that_keeps_losing_the_race_saves_its_version_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ContendedStore()
    client, _ = make(store=store)
    client.get("/set/a/1")
    with caplog.at_level("WARNING", logger="socketify.error"):
        client.get("/set/b/2")
    sid = client.cookies["sid"].split(".")[0]
    saved = orjson.loads(store.get("sess:" + sid) or b"{}")
    assert saved == {"a": "1", "b": "2", "other": sessions.SAVE_TRIES}
    assert [r.getMessage() for r in caplog.records if "saving that one's" in r.getMessage()]


def test_changes_name_what_the_request_set_deleted_or_changed_in_place() -> None:
    raw = b'{"keep":1,"gone":2,"list":[1],"same":3}'
    session = sessions.Session.loaded("a" * 32, orjson.loads(raw), raw, "cookie")
    assert session.changes() == {}
    session["same"] = 3  # set, even to the value it had: the request's own
    del session["gone"]
    session["list"].append(2)
    session["new"] = True
    assert session.changes() == {
        "same": 3,
        "gone": sessions.DELETED,
        "list": [1, 2],
        "new": True,
    }
    session.clear()
    assert set(session.changes()) == {"keep", "gone", "list", "same", "new"}
