"""PomoLogic's values: its types, which Python value is of which, and `coerce`, the one check
of a value against a declared type.

Where Python checks a value against a declaration, it calls `coerce`: the server's writes
and lookup keys (the wire's typed values, server/scheduler/typed_rows.py), the write-ahead
log's recovery (server/wal/wal.py), the answers the server sends (server/api/service.py)
and the in-process engine (engine/engine.py). What differs between them (where a value's
type comes from, whether a CID's text or NaN is checked there, the words and class of the
error) is each caller's adapter; what a type accepts is decided here. A bulk load's rows
are typed by its Spark job instead (server/load/formats.py), never one by one in Python.
"""

from __future__ import annotations

from typing import Any

from pomoview.planner.frontend.cid import is_cid

TYPES = ("int", "float", "string", "bool", "bytes", "cid")
NUMERIC = ("int", "float")
# The type of a derived attribute nothing constrains: the result of a user-defined
# aggregate, or an attribute only ever copied from itself through recursion.
ANY = "any"

# A value as Python holds it; a cid is its CIDv1 text, a `str` (cid.py).
Value = int | float | str | bool | bytes


class BadValue(ValueError):
    """A value that does not fit the type it was checked against; the message says where."""


def type_of(value: object) -> str | None:
    """The PomoLogic type of a Python value, or None for a value of no PomoLogic type. A str
    is a string: a cid is written as its text, and only a declaration tells them apart."""
    # bool before int: True is an int in Python, but not in PomoLogic.
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    return None


def is_nan(value: object) -> bool:
    """Whether `value` is a NaN, which equals nothing, itself included: a row holding it could
    never be deleted, nor a key holding it found."""
    return isinstance(value, float) and value != value


def coerce(
    value: Any,
    type_: str,
    where: str,
    *,
    given: str | None = None,
    check_cid: bool = True,
    allow_nan: bool = False,
) -> Value:
    """`value` as a value of the declared type `type_`; raises BadValue naming `where`.

    - A value of the type is itself, and ANY (an attribute type inference left untyped)
      takes any value: no declaration constrains it.
    - An int where a float is declared is that float; the value is the same.
    - A string where a cid is declared is the CID's text, as a program's string literal is
      (validate.py); with `check_cid` it must be CID text (`is_cid`), which nothing later
      checks.
    - NaN is refused (`is_nan`), unless `allow_nan`.

    `given` is the type the value was sent as, when its sender said (the wire's typed
    values: a `cid_value` is a str given as "cid"). It is trusted, and a mismatch names it.
    Without it the value's own type counts (`type_of`), and a mismatch names its Python type.
    """
    kind = type_of(value) if given is None else given
    if kind != type_ and type_ != ANY:
        if kind == "int" and type_ == "float":
            return float(value)  # neither NaN nor a CID
        if not (kind == "string" and type_ == "cid"):
            shown = type(value).__name__ if given is None else given
            raise BadValue(f"{where}: expected {type_}, got {shown} {value!r}")
    if type_ == "cid":
        if check_cid and not (isinstance(value, str) and is_cid(value)):
            raise BadValue(f"{where}: {value!r} is not a CID (CIDv1, base32 text)")
    elif not allow_nan and is_nan(value):
        raise BadValue(f"{where}: NaN is not a value (it is not equal to itself)")
    return value
