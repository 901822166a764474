"""Declarative validation of JSON documents, and a handler decorator answering 422.

A schema is a list of field rules built fluently::

    SIGNUP = [
        field("email").required().email(),
        field("age").integer().min(13).max(120),
        field("role").one_of(["user", "admin"]),
    ]

    @server.post("/signup")
    @validate.body(SIGNUP)
    def signup(req, res):
        doc = req.locals["body"]          # the parsed, validated document
        ...

Theory of operation. Each field is checked on its own, in this order, collecting messages:

1. presence: the document is an object with the key and a non-null value; an absent field
   gets `is required` when required, and no other check runs either way;
2. type (`must be a string`, ...), and a mismatch stops this field's checks;
3. email, 4. min/max (size for strings, arrays, objects; value for numbers),
5. one_of, 6. matches (the whole string), 7. custom.

Deliberate choices: string sizes count characters (code points), not
UTF-8 bytes; `one_of([])` allows nothing; min/max do not apply to booleans; patterns are
ECMAScript-flavoured (ASCII `\\d`/`\\w`, `(?<name>...)` groups) and compiled once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import Enum
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from socketify.core.request import Request
    from socketify.core.response import Response

__all__ = [
    "BODY_KEY",
    "Field",
    "FieldError",
    "Result",
    "Schema",
    "Type",
    "body",
    "field",
    "validate",
]

#: Where `body()` leaves the parsed document for the handler: `req.locals["body"]`.
BODY_KEY = "body"

Custom = Callable[[Any], "str | None"]


class Type(Enum):
    """The JSON type a field must have."""

    ANY = "any"
    STRING = "a string"
    INTEGER = "an integer"
    NUMBER = "a number"
    BOOLEAN = "a boolean"
    ARRAY = "an array"
    OBJECT = "an object"


def _is_number(value: Any) -> bool:
    # bool is an int subclass in Python; in JSON a boolean is not a number.
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPE_CHECKS: dict[Type, Callable[[Any], bool]] = {
    Type.ANY: lambda value: True,
    Type.STRING: lambda value: isinstance(value, str),
    # A JSON integer: 5.0 is a float literal, so it is not one.
    Type.INTEGER: lambda value: isinstance(value, int) and not isinstance(value, bool),
    Type.NUMBER: _is_number,
    Type.BOOLEAN: lambda value: isinstance(value, bool),
    Type.ARRAY: lambda value: isinstance(value, list),
    Type.OBJECT: lambda value: isinstance(value, dict),
}


@dataclass(frozen=True)
class FieldError:
    """One failure: the field's name and a message such as `is required`."""

    field: str
    message: str


@dataclass
class Result:
    """The outcome of `validate()`: `ok`, and the errors in schema order."""

    errors: list[FieldError] = dataclass_field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there are no errors."""
        return not self.errors

    def first_message(self) -> str:
        """The first error's message, or "" when ok."""
        return self.errors[0].message if self.errors else ""

    def errors_json(self) -> dict[str, Any]:
        """`{"error": "validation failed", "errors": {field: [messages...]}}`."""
        by_field: dict[str, list[str]] = {}
        for error in self.errors:
            by_field.setdefault(error.field, []).append(error.message)
        return {"error": "validation failed", "errors": by_field}


def _canonical(value: Any) -> str:
    """A string as itself, anything else as compact JSON (object keys sorted)."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _compile_ecmascript(pattern: str) -> re.Pattern[str] | None:
    """Compile an ECMAScript-style pattern with `re`; None when it is not valid."""
    # ECMAScript spells named groups (?<name>...) and back-references \k<name>;
    # Python wants (?P<name>...) and (?P=name). Lookbehinds (?<= and (?<! are left alone.
    translated = re.sub(r"\(\?<(?![=!])", "(?P<", pattern)
    translated = re.sub(r"\\k<(\w+)>", r"(?P=\1)", translated)
    try:
        # ASCII: in ECMAScript \d, \w and \b are ASCII-only.
        return re.compile(translated, re.ASCII)
    except re.error:
        return None


class Field:
    """The rules for one field, built fluently: `field("age").required().integer().min(0)`."""

    __slots__ = (
        "_allowed",
        "_custom",
        "_email",
        "_max",
        "_min",
        "_pattern",
        "_required",
        "_type",
        "name",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self._required = False
        self._type = Type.ANY
        self._min: float | None = None
        self._max: float | None = None
        self._email = False
        self._allowed: frozenset[str] | None = None
        # (source, compiled or None when the pattern is invalid)
        self._pattern: tuple[str, re.Pattern[str] | None] | None = None
        self._custom: Custom | None = None

    def required(self) -> Field:
        """Absent or null is an error (`is required`)."""
        self._required = True
        return self

    def optional(self) -> Field:
        """Absent or null is fine (the default)."""
        self._required = False
        return self

    def type(self, kind: Type | str) -> Field:
        """The value must have JSON type `kind` (a `Type`, or its name such as "string")."""
        if isinstance(kind, Type):
            self._type = kind
        elif kind.upper() in Type.__members__:
            self._type = Type[kind.upper()]
        else:
            raise ValueError(f"unknown JSON type {kind!r}; use one of {list(Type.__members__)}")
        return self

    def string(self) -> Field:
        """The value must be a string."""
        return self.type(Type.STRING)

    def integer(self) -> Field:
        """The value must be a JSON integer (5.0 is not)."""
        return self.type(Type.INTEGER)

    def number(self) -> Field:
        """The value must be a number (booleans are not numbers)."""
        return self.type(Type.NUMBER)

    def boolean(self) -> Field:
        """The value must be true or false."""
        return self.type(Type.BOOLEAN)

    def array(self) -> Field:
        """The value must be an array."""
        return self.type(Type.ARRAY)

    def object(self) -> Field:
        """The value must be an object."""
        return self.type(Type.OBJECT)

    def min(self, bound: float) -> Field:
        """Minimum length (string, array, object) or value (number)."""
        self._min = bound
        return self

    def max(self, bound: float) -> Field:
        """Maximum length (string, array, object) or value (number)."""
        self._max = bound
        return self

    def email(self) -> Field:
        """The value must look like an email address; also makes the field a string."""
        self._email = True
        return self.type(Type.STRING)

    def one_of(self, allowed: Iterable[Any]) -> Field:
        """The value must be one of `allowed` (non-strings compare as compact JSON)."""
        self._allowed = frozenset(_canonical(value) for value in allowed)
        return self

    def matches(self, pattern: str) -> Field:
        """A string value must match `pattern` (ECMAScript-style regex) as a whole."""
        self._pattern = (pattern, _compile_ecmascript(pattern))
        return self

    def custom(self, check: Custom) -> Field:
        """`check(value)` returns an error message, or None when the value is fine."""
        self._custom = check
        return self

    def check(self, doc: Any, out: list[FieldError]) -> None:
        """Check this field of `doc`, appending failures to `out`."""
        if not isinstance(doc, dict) or doc.get(self.name) is None:
            if self._required:
                out.append(FieldError(self.name, "is required"))
            return
        value = doc[self.name]

        def fail(message: str) -> None:
            out.append(FieldError(self.name, message))

        if not _TYPE_CHECKS[self._type](value):
            fail(f"must be {self._type.value}")
            return  # the remaining rules assume the type held
        if self._email and not (isinstance(value, str) and _looks_like_email(value)):
            fail("must be a valid email")
        if self._min is not None or self._max is not None:
            self._check_bounds(value, fail)
        if self._allowed is not None and _canonical(value) not in self._allowed:
            fail("is not an allowed value")
        if self._pattern is not None and isinstance(value, str):
            compiled = self._pattern[1]
            if compiled is None:
                fail("has an invalid validation pattern")
            elif compiled.fullmatch(value) is None:
                fail("has an invalid format")
        if self._custom is not None:
            message = self._custom(value)
            if message is not None:
                fail(message)

    def _check_bounds(self, value: Any, fail: Callable[[str], None]) -> None:
        if isinstance(value, str | list | dict):
            size, small, large = len(value), "is too short", "is too long"
        elif _is_number(value):
            size, small, large = value, "is too small", "is too large"
        else:
            return  # booleans have neither a size nor a magnitude
        if self._min is not None and size < self._min:
            fail(small)
        if self._max is not None and size > self._max:
            fail(large)

    def __repr__(self) -> str:
        return f"<Field {self.name!r} {self._type.name.lower()}>"


Schema = Sequence[Field]


def field(name: str) -> Field:
    """Start the rules for the field `name` (optional until `.required()`)."""
    return Field(name)


def _looks_like_email(text: str) -> bool:
    # Loose on purpose: an "@" that is not first, then a "." after it, not the last character.
    at = text.find("@")
    if at <= 0:
        return False
    dot = text.find(".", at)
    return dot != -1 and dot + 1 < len(text)


def validate(doc: Any, schema: Schema) -> Result:
    """Check `doc` against every field of `schema`; a non-object fails every required field."""
    errors: list[FieldError] = []
    for rule in schema:
        rule.check(doc, errors)
    return Result(errors)


Handler = Callable[["Request", "Response"], Any]


def body(schema: Schema) -> Callable[[Handler], Handler]:
    """Decorate a handler `(req, res)`: validate the JSON body first, answering 422 on errors.

    The 422 body is `Result.errors_json()`. A body that is not JSON at all is a 400 (the same
    answer as `req.json()`); an empty body counts as no document, so required fields are
    reported. On success the handler finds the parsed document in `req.locals["body"]`.
    """
    rules = tuple(schema)  # frozen now: later edits to the caller's list change nothing

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def validated(req: Request, res: Response) -> Any:
            raw = req.body
            doc = req.json() if raw and not raw.isspace() else None
            result = validate(doc, rules)
            if not result.ok:
                res.status(422).json(result.errors_json())
                return None
            req.locals[BODY_KEY] = doc
            return handler(req, res)

        return validated

    return decorate
