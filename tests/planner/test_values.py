"""`values.coerce`, the one check of a value against a declared PomoLogic type that the
engine, the server's writes and lookup keys, the write-ahead log and the answers share."""

from __future__ import annotations

import math

import pytest

from pomoview.planner.frontend.cid import cid
from pomoview.planner.frontend.values import ANY, BadValue, coerce, is_nan, type_of

A_CID = cid("r", [("x", 1)])


@pytest.mark.parametrize(
    ("value", "type_"),
    [(True, "bool"), (1, "int"), (1.5, "float"), ("a", "string"), (b"a", "bytes"), (None, None), ([1], None)],
)
def test_type_of(value: object, type_: str | None) -> None:
    assert type_of(value) == type_


@pytest.mark.parametrize(
    ("value", "type_"),
    [(1, "int"), (1.5, "float"), ("a", "string"), (False, "bool"), (b"", "bytes"), (A_CID, "cid")],
)
def test_a_value_of_the_type_is_itself(value: object, type_: str) -> None:
    assert coerce(value, type_, "w") is value


def test_an_int_where_a_float_is_declared_is_that_float() -> None:
    got = coerce(3, "float", "w")
    assert type(got) is float and got == 3.0
    got = coerce(3, "float", "w", given="int")
    assert type(got) is float and got == 3.0


@pytest.mark.parametrize("value", [1, 2.5, "a", True, b"\x00", A_CID, None])
def test_any_takes_any_value(value: object) -> None:
    assert coerce(value, ANY, "w") is value


@pytest.mark.parametrize(("kind", "value"), [("int", 1), ("string", "a"), ("bytes", b""), ("cid", A_CID)])
def test_any_takes_any_value_as_sent(kind: str, value: object) -> None:
    assert coerce(value, ANY, "w", given=kind) is value


@pytest.mark.parametrize(
    ("value", "type_", "message"),
    [
        (True, "int", "w: expected int, got bool True"),  # a bool is not an int
        (1.0, "int", "w: expected int, got float 1.0"),
        ("1", "int", "w: expected int, got str '1'"),  # a mismatch names the Python type
        (1, "bool", "w: expected bool, got int 1"),
        (b"a", "string", "w: expected string, got bytes b'a'"),
        (1, "cid", "w: expected cid, got int 1"),
    ],
)
def test_a_value_of_another_type_is_refused(value: object, type_: str, message: str) -> None:
    with pytest.raises(BadValue) as refused:
        coerce(value, type_, "w")
    assert str(refused.value) == message
    assert isinstance(refused.value, ValueError)


def test_a_mismatch_names_the_type_the_value_was_sent_as() -> None:
    with pytest.raises(BadValue, match=r"^w: expected int, got string 'a'$"):
        coerce("a", "int", "w", given="string")
    with pytest.raises(BadValue, match=r"^w: expected string, got cid "):
        coerce(A_CID, "string", "w", given="cid")


def test_a_cid_is_cid_text_unless_told_not_to_check() -> None:
    assert coerce(A_CID, "cid", "w", given="string") == A_CID
    for given in (None, "string", "cid"):
        with pytest.raises(BadValue, match=r"^w: 'bnotacid' is not a CID \(CIDv1, base32 text\)$"):
            coerce("bnotacid", "cid", "w", given=given)
        assert coerce("bnotacid", "cid", "w", given=given, check_cid=False) == "bnotacid"


def test_nan_is_refused_unless_allowed() -> None:
    for type_ in ("float", ANY):
        with pytest.raises(BadValue, match=r"^w: NaN is not a value \(it is not equal to itself\)$"):
            coerce(math.nan, type_, "w")
        assert math.isnan(coerce(math.nan, type_, "w", allow_nan=True))
    assert coerce(math.inf, "float", "w") == math.inf
    assert is_nan(math.nan) and not is_nan(1) and not is_nan("nan") and not is_nan(None)
