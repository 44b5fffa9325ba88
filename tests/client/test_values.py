"""Python value <-> wire `Value`/`Row` conversion."""

from __future__ import annotations

import pytest

from pomoview.client import Cid
from pomoview.client.values import (
    INT64_MAX,
    INT64_MIN,
    dict_to_row,
    from_value,
    row_to_dict,
    to_value,
)
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb


@pytest.mark.parametrize(
    ("value", "case"),
    [
        (42, "int_value"),
        (-7, "int_value"),
        (0, "int_value"),
        (1.5, "float_value"),
        (-0.0, "float_value"),
        ("héllo", "string_value"),
        ("", "string_value"),
        (True, "bool_value"),
        (False, "bool_value"),
        (b"\x00\xff", "bytes_value"),
        (Cid("bafkreigh2akiscaildc"), "cid_value"),
    ],
)
def test_round_trip_each_type(value: object, case: str) -> None:
    v = to_value("a", value)
    assert v.WhichOneof("kind") == case
    back = from_value("a", pb.Value.FromString(v.SerializeToString()))
    assert back == value
    assert type(back) is type(value)


def test_bool_stays_bool_not_int() -> None:
    row = dict_to_row({"t": True, "f": False, "one": 1, "zero": 0})
    assert row.fields["t"].WhichOneof("kind") == "bool_value"
    assert row.fields["one"].WhichOneof("kind") == "int_value"
    back = row_to_dict(row)
    assert back["t"] is True and back["f"] is False
    assert type(back["one"]) is int and type(back["zero"]) is int


def test_bytearray_becomes_bytes() -> None:
    assert from_value("b", to_value("b", bytearray(b"xy"))) == b"xy"


def test_cid_is_a_str_but_travels_as_cid() -> None:
    c = Cid("bafy")
    assert isinstance(c, str) and c == "bafy"
    assert to_value("c", c).cid_value == "bafy"
    assert to_value("s", "bafy").WhichOneof("kind") == "string_value"


def test_int64_bounds() -> None:
    assert from_value("n", to_value("n", INT64_MAX)) == INT64_MAX
    assert from_value("n", to_value("n", INT64_MIN)) == INT64_MIN
    with pytest.raises(ValueError, match="'big'"):
        to_value("big", INT64_MAX + 1)
    with pytest.raises(ValueError, match="'small'"):
        dict_to_row({"small": INT64_MIN - 1})


@pytest.mark.parametrize("value", [[1, 2], None, {"a": 1}, 1 + 2j, object()])
def test_unsupported_type_names_attribute(value: object) -> None:
    with pytest.raises(TypeError, match="'tags'"):
        dict_to_row({"ok": 1, "tags": value})


def test_non_str_attribute_name() -> None:
    with pytest.raises(TypeError):
        dict_to_row({1: 2})  # type: ignore[dict-item]


def test_unset_value_is_an_error() -> None:
    row = pb.Row()
    row.fields["x"].CopyFrom(pb.Value())
    with pytest.raises(ValueError, match="'x'"):
        row_to_dict(row)


def test_row_round_trip_mixed() -> None:
    d: dict[str, object] = {
        "id": 1,
        "score": 2.5,
        "title": "t",
        "ok": True,
        "blob": b"z",
        "ref": Cid("bafx"),
    }
    assert row_to_dict(pb.Row.FromString(dict_to_row(d).SerializeToString())) == d


def test_row_to_dict_orders_attributes_by_name() -> None:
    # Five names: the map's own iteration order is not sorted for these (checked by hand).
    row = dict_to_row({"votes": 1, "id": 2, "title": "t", "a": 3, "zz": 4})
    assert list(row_to_dict(row)) == ["a", "id", "title", "votes", "zz"]
