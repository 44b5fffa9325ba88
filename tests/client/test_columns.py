"""The client's columnar form of a write: rows of one shape go as columns and decode back to
the same rows; rows that do not fit go as rows, with the row form's errors."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pomoview.client import messages
from pomoview.client.values import INT64_MAX, INT64_MIN, Cid, columns_to_rows, rows_to_columns
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

VALUES: list[st.SearchStrategy[Any]] = [
    st.integers(INT64_MIN, INT64_MAX),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.booleans(),
    st.binary(),
    st.text().map(Cid),
]


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isnan(a) and math.isnan(b) or a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


@st.composite
def uniform_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.text(max_size=4), min_size=1, max_size=5, unique=True))
    kinds = [draw(st.sampled_from(VALUES)) for _ in names]
    n = draw(st.integers(1, 6))
    return [{name: draw(kind) for name, kind in zip(names, kinds, strict=True)} for _ in range(n)]


@given(uniform_rows())
def test_rows_of_one_shape_go_as_columns_and_come_back(rows: list[dict[str, Any]]) -> None:
    columns = rows_to_columns(rows)
    assert columns is not None, "rows of one shape must not fall back to the row form"
    assert [c.name for c in columns.columns] == list(rows[0])
    back = columns_to_rows(pb.Columns.FromString(columns.SerializeToString()))
    assert len(back) == len(rows)
    for got, want in zip(back, rows, strict=True):
        assert list(got) == list(want)
        assert all(_same(got[a], want[a]) for a in want), (got, want)


@pytest.mark.parametrize(
    "rows",
    [
        [{"a": 1}, {"a": 1.5}],  # int then float: the server decides per value, as rows do
        [{"a": 1}, {"a": True}],
        [{"a": "x"}, {"a": Cid("x")}],
        [{"a": 1}, {"b": 1}],
        [{"a": 1}, {"a": 1, "b": 2}],
        [{}],
        [{"a": 2**63}],
    ],
)
def test_rows_that_do_not_fit_go_as_rows(rows: list[dict[str, Any]]) -> None:
    assert rows_to_columns(rows) is None
    request = messages.write_request({"s": (rows, ())}) if rows != [{"a": 2**63}] else None
    if request is not None:
        assert len(request.changes[0].inserts) == len(rows)
        assert not request.changes[0].HasField("insert_columns")
    with pytest.raises(ValueError, match="do not fit the columnar form"):
        messages.write_request({"s": (rows, ())}, columnar=True)


def test_errors_are_the_row_forms() -> None:
    with pytest.raises(ValueError, match="attribute 'a': int 9223372036854775808 is outside int64"):
        messages.write_request({"s": ([{"a": 2**63}], ())})
    with pytest.raises(TypeError, match="attribute 'a': unsupported type list"):
        messages.write_request({"s": ([{"a": [1]}], ())})


def test_misaligned_columns_do_not_decode() -> None:
    columns = pb.Columns(
        columns=[
            pb.Column(name="a", int_values=pb.Column.Ints(values=[1, 2])),
            pb.Column(name="b", int_values=pb.Column.Ints(values=[1])),
        ]
    )
    with pytest.raises(ValueError, match="different lengths"):
        columns_to_rows(columns)
