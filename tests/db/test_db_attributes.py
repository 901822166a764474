"""Attribute reads in one call (socketify.db.attributes) return and record what Pony's do:
the same values, read bits, lazy loads and errors, each case run with Pony's own `__get__`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pony.orm import Discriminator, Optional, PrimaryKey, Required, Set, commit, db_session
from pony.orm import core as pony_core

import socketify.db
from socketify.db.fastpath.attributes import fast_read_class

pytestmark = [pytest.mark.usefixtures("fast_path"), pytest.mark.fast_path_only]


@pytest.fixture
def models(sqlite_url: str) -> Iterator[Any]:
    db = socketify.db.connect(sqlite_url, pool_size=1)

    class Team(db.Entity):  # type: ignore[name-defined,misc]
        name = Required(str)
        members = Set("Member")

    class Member(db.Entity):  # type: ignore[name-defined,misc]
        code = PrimaryKey(str)
        name = Required(str)
        nickname = Optional(str, nullable=True)
        bio = Optional(str, lazy=True)
        score = Optional(int, volatile=True)
        team = Optional(Team)

    db.generate_mapping(create_tables=True)
    with db_session:
        team = Team(name="Blue")
        Member(code="ann", name="Ann", nickname=None, bio="likes tea", score=3, team=team)
        Member(code="bob", name="Bob", nickname="B", bio="", score=None)
    db.Team, db.Member = Team, Member  # type: ignore[attr-defined]
    yield db
    db.disconnect()


@contextmanager
def ponys_reads(entity: Any) -> Iterator[None]:
    """Within the block, the entity's attributes read with Pony's own classes."""
    swapped = [(a, type(a)) for a in entity._attrs_ if type(a) is not pony_class(type(a))]
    assert swapped, "no attribute has the fast read"
    for attr, cls in swapped:
        attr.__class__ = pony_class(cls)
    try:
        yield
    finally:
        for attr, cls in swapped:
            attr.__class__ = cls


def pony_class(cls: type) -> type:
    return next(c for c in cls.__mro__ if c.__module__ == "pony.orm.core")


def both_ways(db: Any, scenario: Callable[[], Any]) -> tuple[Any, Any]:
    """`scenario()`'s outcome (a value or the exception's type and text), fast, then Pony's."""
    outcomes = []
    for pony in (False, True):
        with ponys_reads(db.Member) if pony else nullcontext():
            try:
                outcomes.append(scenario())
            except Exception as exc:
                outcomes.append((type(exc), str(exc)))
    return outcomes[0], outcomes[1]


@contextmanager
def nullcontext() -> Iterator[None]:
    yield


def test_plain_columns_get_the_fast_read_and_relations_keep_ponys(models: Any) -> None:
    member = models.Member
    for name in ("code", "name", "nickname", "bio", "score"):
        attr = member.__dict__[name]
        assert type(attr).__name__ == pony_class(type(attr)).__name__
        assert type(attr).__mro__[2] is pony_class(type(attr))  # just the mixin in between
    assert isinstance(member.code, PrimaryKey) and isinstance(member.name, Required)
    assert type(member.__dict__["team"]) is Optional  # a relation: Pony's reads
    assert type(models.Team.__dict__["members"]) is Set
    discriminator = Discriminator(str)
    assert fast_read_class(discriminator) is None


@pytest.mark.parametrize("code", ["ann", "bob"])
def test_loaded_values_and_read_bits_are_ponys(models: Any, code: str) -> None:
    def read() -> Any:
        with db_session:
            member = models.Member[code]
            values = (member.code, member.name, member.nickname, member.score)
            rbits = member._rbits_
            member.name = member.name + "!"  # written: reading it again sets no read bit
            again = member.name
            outcome = values, rbits, again, member._rbits_, member._wbits_
            pony_core.rollback()  # the other run starts from the same row
            return outcome

    fast, pony = both_ways(models, read)
    assert fast == pony


def test_a_lazy_attribute_loads_on_first_read_as_ponys(models: Any) -> None:
    def read() -> Any:
        with db_session:
            member = models.Member["ann"]
            loaded_before = models.Member.bio in member._vals_
            bio = member.bio
            return loaded_before, bio, models.Member.bio in member._vals_, member._rbits_

    fast, pony = both_ways(models, read)
    assert fast == pony
    assert fast[:3] == (False, "likes tea", True)


def test_a_new_objects_values_read_as_ponys(models: Any) -> None:
    def read() -> Any:
        with db_session:
            member = models.Member(code="cy", name="Cy")
            values = (member.code, member.name, member.nickname, member._rbits_, member._wbits_)
            pony_core.rollback()
            return values

    fast, pony = both_ways(models, read)
    assert fast == pony


def test_a_deleted_object_refuses_reads_but_its_key_as_ponys(models: Any) -> None:
    def read() -> Any:
        with db_session:
            member = models.Member["bob"]
            member.name  # noqa: B018  # loaded
            member.delete()
            pony_core.flush()  # now "deleted", no longer "marked_to_delete"
            key = member.code
            refused = None
            try:
                member.name  # noqa: B018
            except Exception as exc:
                refused = (type(exc), str(exc))
            pony_core.rollback()
            return key, refused

    fast, pony = both_ways(models, read)
    assert fast == pony
    assert fast[0] == "bob" and "deleted" in fast[1][1]


def test_reads_after_the_session_are_ponys_errors(models: Any) -> None:
    def read() -> Any:
        with db_session:
            member = models.Member["ann"]
            member.name  # noqa: B018
        results = []
        for name in ("code", "name", "bio"):
            try:
                results.append(getattr(member, name))
            except Exception as exc:
                results.append((type(exc), str(exc)))
        return results

    fast, pony = both_ways(models, read)
    assert fast == pony


def test_the_optimistic_check_still_sees_what_was_read(models: Any) -> None:
    """A concurrent change to a read attribute fails the commit, as with Pony's reads."""
    with db_session:
        member = models.Member["ann"]
        member.name  # noqa: B018  # read: its bit is in the optimistic check
        models.execute("UPDATE Member SET name = 'Changed' WHERE code = 'ann'")
        member.nickname = "A"
        with pytest.raises(pony_core.OptimisticCheckError):
            commit()
        pony_core.rollback()


def test_the_class_attribute_is_the_attribute_itself(models: Any) -> None:
    attr = models.Member.name
    assert attr is models.Member.__dict__["name"]
    assert repr(attr) == "Member.name"
