"""json_util: forgiving parse, dotted-path find, typed get/get_or/require."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from socketify import json_util

DOC = {
    "user": {"name": "Ada", "age": 36, "score": 9.75, "admin": False, "nick": None},
    "items": [{"id": 1}, {"id": 2, "tags": ["a", "b"]}],
    "0": "zero-key",
    "count": "7",
}


# -- parse ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", b"", None, "{", "nope", "[1,]", "  "])
def test_parse_gives_none_for_empty_or_invalid_text(text) -> None:
    assert json_util.parse(text) is None


def test_parse_accepts_str_and_bytes() -> None:
    assert json_util.parse('{"a": [1, 2]}') == {"a": [1, 2]}
    assert json_util.parse(b'"x"') == "x"


def test_parse_or_returns_fallback_only_when_text_is_unusable() -> None:
    assert json_util.parse_or("", {"d": 1}) == {"d": 1}
    assert json_util.parse_or("garbage", 5) == 5
    assert json_util.parse_or("null", 5) is None  # null is a valid document, not a failure
    assert json_util.parse_or("[3]", 5) == [3]


# -- find / has -----------------------------------------------------------------------------


def test_find_walks_objects_and_array_indexes() -> None:
    assert json_util.find(DOC, "user.name") == "Ada"
    assert json_util.find(DOC, "items.1.tags.0") == "a"
    assert json_util.find(DOC, "items.0") == {"id": 1}


def test_find_with_empty_path_returns_the_root() -> None:
    assert json_util.find(DOC, "") is DOC
    assert json_util.find(5, "") == 5


@pytest.mark.parametrize(
    "path",
    [
        "user..name",  # empty segment
        ".user",
        "user.",
        "user.missing",
        "items.2",  # out of range
        "items.-1",  # not all digits
        "items.x",  # a key on an array
        "user.name.first",  # a key on a string
        "items.1.tags.9",
        "items.\u0661",  # a non-ASCII digit is not an index
    ],
)
def test_find_returns_none_for_paths_that_do_not_exist(path: str) -> None:
    assert json_util.find(DOC, path) is None
    assert json_util.find(DOC, path, default="dflt") == "dflt"


def test_find_uses_numeric_segment_as_key_on_objects() -> None:
    assert json_util.find(DOC, "0") == "zero-key"


def test_find_index_with_leading_zero_is_still_an_index() -> None:
    assert json_util.find(DOC, "items.01.id") == 2


def test_has_is_true_only_for_non_null_values() -> None:
    assert json_util.has(DOC, "user.admin")  # False is a value
    assert not json_util.has(DOC, "user.nick")  # null
    assert not json_util.has(DOC, "user.missing")
    assert json_util.has(DOC, "")


# -- get / get_or -----------------------------------------------------------------------------


def test_get_converts_to_the_asked_type() -> None:
    assert json_util.get(DOC, "user.name", str) == "Ada"
    assert json_util.get(DOC, "user.age", int) == 36
    assert json_util.get(DOC, "user.age", float) == 36.0
    assert json_util.get(DOC, "user.admin", bool) is False
    assert json_util.get(DOC, "items", list) == DOC["items"]
    assert json_util.get(DOC, "user", dict) == DOC["user"]
    assert json_util.get(DOC, "user.name") == "Ada"  # no type: the value as is


def test_get_truncates_a_float_asked_for_as_int() -> None:
    assert json_util.get(DOC, "user.score", int) == 9
    assert json_util.get({"n": -2.9}, "n", int) == -2


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("count", int),  # a string is not an int
        ("user.age", str),
        ("user.admin", int),  # a boolean is not a number
        ("user.admin", float),
        ("user.age", bool),
        ("user", list),
        ("items", dict),
    ],
)
def test_get_gives_none_when_the_value_is_not_convertible(path: str, kind: type) -> None:
    assert json_util.get(DOC, path, kind) is None


def test_get_gives_none_for_missing_or_null() -> None:
    assert json_util.get(DOC, "user.nick", str) is None
    assert json_util.get(DOC, "nope", int) is None


def test_get_refuses_types_json_cannot_hold() -> None:
    with pytest.raises(TypeError):
        json_util.get(DOC, "user.age", complex)


def test_get_or_infers_the_type_from_the_fallback() -> None:
    assert json_util.get_or(DOC, "user.age", 0) == 36
    assert json_util.get_or(DOC, "user.missing", 10) == 10
    assert json_util.get_or(DOC, "count", 0) == 0  # "7" is a string, not an int
    assert json_util.get_or(DOC, "user.name", "anon") == "Ada"
    assert json_util.get_or(DOC, "user.nick", "anon") == "anon"
    assert json_util.get_or(DOC, "user.score", 0, float) == 9.75
    assert json_util.get_or(DOC, "user.name", None) == "Ada"


# -- require --------------------------------------------------------------------------------


def test_require_returns_the_converted_value() -> None:
    assert json_util.require(DOC, "items.1.id", int) == 2
    assert json_util.require(DOC, "user.score", int) == 9


@pytest.mark.parametrize("path", ["user.nick", "user.missing", "items.5"])
def test_require_names_a_missing_or_null_field(path: str) -> None:
    with pytest.raises(json_util.Error) as caught:
        json_util.require(DOC, path, str)
    assert caught.value.path == path
    assert str(caught.value) == f"missing required field '{path}'"


def test_require_names_a_field_of_the_wrong_type() -> None:
    with pytest.raises(json_util.Error) as caught:
        json_util.require(DOC, "count", int)
    assert caught.value.path == "count"
    assert str(caught.value) == "field 'count' has the wrong type"


def test_json_util_error_is_a_value_error() -> None:
    assert issubclass(json_util.Error, ValueError)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text("abc.", max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values, st.text("abc.01", max_size=8))
def test_find_never_raises_and_has_agrees_with_find(doc, path: str) -> None:
    found = json_util.find(doc, path)
    assert json_util.has(doc, path) == (found is not None)
