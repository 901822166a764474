"""`user.name` in one call: Pony's attribute read, for values the object has loaded already.

Theory of operation. Reading an attribute of a Pony entity runs two Python methods of the
attribute descriptor (`Attribute.__get__`, then `Attribute.get`), about 15 lines for what is,
in the common case, a dictionary lookup plus the optimistic check's read bit. After
`generate_mapping`, a database with the fast path on gives each plain column attribute
(`Required`, `Optional`, `PrimaryKey`; not relations, collections or the discriminator) a
subclass of its own class whose `__get__` does that common case in one call and hands every
other case to Pony's `__get__`: an object whose session is over, one deleted or cancelled, a
value not loaded yet (a lazy attribute). The subclass keeps the class name, adds no slot and changes
nothing else, so `isinstance`, error messages and Pony's internals see the same attribute.

What the fast read does is exactly Pony's for a loaded value: return `obj._vals_[attr]`, and,
for a non-key attribute of an object being read (`_wbits_` not None), set the attribute's bit
in `_rbits_` unless it was written. tests/db/test_db_attributes.py compares both, case by case.
"""

from __future__ import annotations

from typing import Any

from pony.orm.core import Attribute, Discriminator, Optional, PrimaryKey, Required

__all__ = ["fast_read_class", "speed_up_reads"]

_GONE = ("deleted", "cancelled")  # statuses whose non-key reads Pony refuses
_pony_get = Attribute.__get__


class _LoadedRead:
    """Mixin: `__get__` for a loaded value in one call, Pony's otherwise."""

    __slots__ = ()

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        vals = obj._vals_
        if vals is not None and self in vals:
            if self.pk_offset is not None:  # type: ignore[attr-defined]
                return vals[self]  # Pony reads a key without the status check or read bits
            if obj._status_ not in _GONE:
                value = vals[self]
                wbits = obj._wbits_
                if wbits is not None:
                    bit = obj._bits_except_volatile_[self]
                    if not wbits & bit:
                        obj._rbits_ |= bit
                return value
        return _pony_get(self, obj, cls)  # loading, or Pony's error


_FAST_CLASSES: dict[type, type] = {
    pony_class: type(pony_class.__name__, (_LoadedRead, pony_class), {"__slots__": ()})
    for pony_class in (Optional, Required, PrimaryKey)
}


def fast_read_class(attr: Any) -> type | None:
    """The fast-read class for `attr`, or None when its reads stay Pony's own."""
    cls = _FAST_CLASSES.get(type(attr))
    if cls is None or attr.reverse or attr.is_collection or isinstance(attr, Discriminator):
        return None
    return cls


def speed_up_reads(entity: Any) -> int:
    """Give the plain column attributes of `entity` the fast read; how many got it."""
    count = 0
    for attr in entity._new_attrs_:
        cls = fast_read_class(attr)
        if cls is not None:
            attr.__class__ = cls
            count += 1
    return count
