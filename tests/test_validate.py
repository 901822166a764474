"""validate: field rules, their order and messages, errors_json, the @body decorator."""

from __future__ import annotations

import pytest

from socketify import Server, validate
from socketify.testing import TestClient
from socketify.validate import Field, FieldError, Type, field


def messages(doc, *rules: Field) -> dict[str, list[str]]:
    return validate.validate(doc, list(rules)).errors_json()["errors"]


# -- presence -------------------------------------------------------------------------------


def test_fields_are_optional_by_default() -> None:
    assert validate.validate({}, [field("a").string().min(3)]).ok


@pytest.mark.parametrize("doc", [{}, {"a": None}, {"b": 1}])
def test_absent_or_null_required_field_is_required(doc) -> None:
    assert messages(doc, field("a").required()) == {"a": ["is required"]}


def test_absent_field_runs_no_other_check() -> None:
    rule = field("a").required().integer().min(5).custom(lambda v: "never")
    assert messages({}, rule) == {"a": ["is required"]}


def test_optional_after_required_makes_the_field_optional_again() -> None:
    assert validate.validate({}, [field("a").required().optional()]).ok


@pytest.mark.parametrize("doc", [None, [], ["a"], "text", 5, True])
def test_a_non_object_document_fails_every_required_field(doc) -> None:
    rules = [field("a").required(), field("b").required(), field("c")]
    assert messages(doc, *rules) == {"a": ["is required"], "b": ["is required"]}


# -- types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "bad", "message"),
    [
        (field("v").string(), 5, "must be a string"),
        (field("v").integer(), "5", "must be an integer"),
        (field("v").integer(), 5.0, "must be an integer"),
        (field("v").integer(), True, "must be an integer"),
        (field("v").number(), "1", "must be a number"),
        (field("v").number(), False, "must be a number"),
        (field("v").boolean(), 0, "must be a boolean"),
        (field("v").array(), {}, "must be an array"),
        (field("v").object(), [], "must be an object"),
        (field("v").type(Type.STRING), 1, "must be a string"),
        (field("v").type("object"), 1, "must be an object"),
    ],
)
def test_type_mismatch_messages(rule: Field, bad, message: str) -> None:
    assert messages({"v": bad}, rule) == {"v": [message]}


@pytest.mark.parametrize(
    ("rule", "good"),
    [
        (field("v").integer(), 5),
        (field("v").integer(), -(2**70)),
        (field("v").number(), 5),
        (field("v").number(), 2.5),
        (field("v").boolean(), False),
        (field("v").array(), []),
        (field("v").object(), {}),
        (field("v"), "anything"),
    ],
)
def test_matching_types_pass(rule: Field, good) -> None:
    assert validate.validate({"v": good}, [rule]).ok


def test_type_mismatch_stops_the_fields_checks() -> None:
    rule = field("v").string().min(10).one_of(["x"]).custom(lambda v: "custom ran")
    assert messages({"v": 12}, rule) == {"v": ["must be a string"]}


def test_unknown_type_name_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        field("v").type("uuid")


# -- email ----------------------------------------------------------------------------------


@pytest.mark.parametrize("good", ["a@b.c", "ada.lovelace@example.org", "x@y.z.w"])
def test_email_accepts_at_then_dot(good: str) -> None:
    assert validate.validate({"e": good}, [field("e").email()]).ok


@pytest.mark.parametrize("bad", ["@b.c", "ab.c", "a@bc", "a@b.", "a.b@c", ""])
def test_email_rejects_other_shapes(bad: str) -> None:
    assert messages({"e": bad}, field("e").email()) == {"e": ["must be a valid email"]}


def test_email_implies_string() -> None:
    assert messages({"e": 5}, field("e").email()) == {"e": ["must be a string"]}


def test_email_on_a_retyped_field_rejects_non_strings() -> None:
    assert messages({"e": 5}, field("e").email().integer()) == {"e": ["must be a valid email"]}


# -- min / max ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("ab", ["is too short"]),
        ("abc", []),
        ("abcde", []),
        ("abcdef", ["is too long"]),
        ([1, 2], ["is too short"]),
        ([1] * 6, ["is too long"]),
        ({"a": 1}, ["is too short"]),
        (2, ["is too small"]),
        (3, []),
        (5.0, []),
        (5.5, ["is too large"]),
        (True, []),  # a boolean has neither size nor magnitude
    ],
)
def test_min_max_compare_sizes_or_values(value, expected: list[str]) -> None:
    rule = field("v").min(3).max(5)
    assert messages({"v": value}, rule).get("v", []) == expected


def test_string_size_counts_characters_not_bytes() -> None:
    assert validate.validate({"v": "äöü"}, [field("v").max(3)]).ok


def test_min_greater_than_max_reports_both() -> None:
    assert messages({"v": 4}, field("v").min(5).max(3)) == {"v": ["is too small", "is too large"]}


# -- one_of ---------------------------------------------------------------------------------


def test_one_of_accepts_listed_strings() -> None:
    rule = field("role").one_of(["user", "admin"])
    assert validate.validate({"role": "admin"}, [rule]).ok
    assert messages({"role": "root"}, rule) == {"role": ["is not an allowed value"]}


def test_one_of_compares_non_strings_as_compact_json() -> None:
    rule = field("v").one_of(["1", "true", "[1,2]", '{"a":1,"b":2}', "2.5"])
    for value in (1, True, [1, 2], {"b": 2, "a": 1}, 2.5):
        assert validate.validate({"v": value}, [rule]).ok, value
    assert messages({"v": 2}, rule) == {"v": ["is not an allowed value"]}


def test_one_of_accepts_non_string_allowed_values() -> None:
    assert validate.validate({"v": 3}, [field("v").one_of([1, 2, 3])]).ok


def test_one_of_with_nothing_allowed_rejects_everything() -> None:
    assert messages({"v": "x"}, field("v").one_of([])) == {"v": ["is not an allowed value"]}


# -- matches --------------------------------------------------------------------------------


def test_matches_must_match_the_whole_string() -> None:
    rule = field("code").matches(r"[A-Z]{3}\d{2}")
    assert validate.validate({"code": "ABC12"}, [rule]).ok
    for bad in ("ABC123", "xABC12", "ABC1"):
        assert messages({"code": bad}, rule) == {"code": ["has an invalid format"]}


def test_matches_ignores_non_strings() -> None:
    assert validate.validate({"code": 5}, [field("code").matches("x")]).ok


def test_bad_pattern_is_reported_not_raised() -> None:
    rule = field("code").matches("([a-z")
    assert messages({"code": "abc"}, rule) == {"code": ["has an invalid validation pattern"]}


def test_patterns_follow_ecmascript_conventions() -> None:
    arabic_digits = "\u0661\u0662"
    assert messages({"n": arabic_digits}, field("n").matches(r"\d+")) == {
        "n": ["has an invalid format"]
    }
    named = field("w").matches(r"(?<word>[a-z]+)-\k<word>")
    assert validate.validate({"w": "ab-ab"}, [named]).ok
    assert not validate.validate({"w": "ab-cd"}, [named]).ok
    lookbehind = field("p").matches(r"\$(?<=\$)\d+")
    assert validate.validate({"p": "$12"}, [lookbehind]).ok


# -- custom, order, results -----------------------------------------------------------------


def test_custom_message_is_added_and_none_passes() -> None:
    even = field("n").integer().custom(lambda v: None if v % 2 == 0 else "must be even")
    assert validate.validate({"n": 4}, [even]).ok
    assert messages({"n": 3}, even) == {"n": ["must be even"]}


def test_checks_run_in_spec_order_and_all_failures_are_collected() -> None:
    rule = (
        field("v")
        .email()
        .max(3)
        .one_of(["x@y.z"])
        .matches("[a-z]+")
        .custom(lambda v: "custom says no")
    )
    assert messages({"v": "ABCDEF"}, rule) == {
        "v": [
            "must be a valid email",
            "is too long",
            "is not an allowed value",
            "has an invalid format",
            "custom says no",
        ]
    }


def test_result_lists_errors_in_schema_order_and_first_message() -> None:
    schema = [field("b").required(), field("a").integer(), field("b").string()]
    result = validate.validate({"a": "x"}, schema)
    assert not result.ok
    assert result.errors == [FieldError("b", "is required"), FieldError("a", "must be an integer")]
    assert result.first_message() == "is required"


def test_ok_result_has_no_first_message() -> None:
    result = validate.validate({}, [])
    assert result.ok and result.first_message() == "" and result.errors == []


def test_errors_json_groups_messages_by_field() -> None:
    schema = [field("email").required().email(), field("age").integer().min(13).max(12)]
    result = validate.validate({"age": 5}, schema)
    assert result.errors_json() == {
        "error": "validation failed",
        "errors": {"email": ["is required"], "age": ["is too small"]},
    }


# -- @validate.body -------------------------------------------------------------------------

SIGNUP = [
    field("email").required().email(),
    field("age").integer().min(13),
    field("role").one_of(["user", "admin"]),
]


@pytest.fixture
def client() -> TestClient:
    server = Server()

    @server.post("/signup")
    @validate.body(SIGNUP)
    def signup(req, res) -> None:
        res.json({"accepted": req.locals[validate.BODY_KEY]})

    return TestClient(server)


def test_body_decorator_calls_the_handler_with_the_validated_document(client) -> None:
    doc = {"email": "ada@example.org", "age": 36}
    response = client.post("/signup", json=doc)
    assert response.status == 200
    assert response.json() == {"accepted": doc}


def test_body_decorator_answers_422_with_errors_json(client) -> None:
    response = client.post("/signup", json={"email": "nope", "age": 3, "role": "root"})
    assert response.status == 422
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json() == {
        "error": "validation failed",
        "errors": {
            "email": ["must be a valid email"],
            "age": ["is too small"],
            "role": ["is not an allowed value"],
        },
    }


def test_body_decorator_treats_an_empty_body_as_no_document(client) -> None:
    response = client.post("/signup")
    assert response.status == 422
    assert response.json()["errors"] == {"email": ["is required"]}


def test_body_decorator_answers_400_for_malformed_json(client) -> None:
    response = client.post("/signup", data=b"{not json", headers={"Content-Type": JSON})
    assert response.status == 400


def test_body_decorator_reports_a_json_array_as_missing_fields(client) -> None:
    response = client.post("/signup", json=[1, 2])
    assert response.status == 422
    assert response.json()["errors"] == {"email": ["is required"]}


def test_body_decorator_freezes_the_schema_and_keeps_the_handler_name() -> None:
    schema = [field("a").required()]
    decorate = validate.body(schema)
    schema.clear()

    def handler(req, res) -> None:
        """Doc."""

    wrapped = decorate(handler)
    assert wrapped.__name__ == "handler" and wrapped.__doc__ == "Doc."
    server = Server()
    server.post("/x")(wrapped)
    assert TestClient(server).post("/x", json={}).status == 422


JSON = "application/json"
