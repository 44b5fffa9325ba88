"""The Arrow path of a keyed fetch (`latest_of_table`) against the row path
(`latest_of_rows`), on random operation logs: duplicate inserts, deletes, re-inserts, ties
within an epoch, every attribute type, NaN. The row path is the reference: it is the
definition of "present"."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.server.store.presence import latest_of_rows, latest_of_table

TYPES = {
    "int": (pa.int64(), st.integers(-3, 3)),
    "string": (pa.string(), st.sampled_from(["", "a", "b", "é"])),
    "bytes": (pa.binary(), st.sampled_from([b"", b"\x00", b"\xff"])),
    "bool": (pa.bool_(), st.booleans()),
    "float": (pa.float64(), st.sampled_from([0.0, -1.5, math.nan, math.inf])),
}


@st.composite
def logs(draw: Any) -> tuple[tuple[tuple[str, str], ...], list[tuple[Any, ...]]]:
    kinds = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=0, max_size=3))
    schema = tuple((f"a{i}", k) for i, k in enumerate(kinds))
    row = st.tuples(*(TYPES[k][1] for k in kinds))
    ops = draw(
        st.lists(
            st.tuples(row, st.integers(1, 4), st.sampled_from([1, -1])), min_size=0, max_size=30
        )
    )
    return schema, [(*values, epoch, op) for values, epoch, op in ops]


def table(schema: tuple[tuple[str, str], ...], rows: list[tuple[Any, ...]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [()] * (len(schema) + 2)
    fields = [(a, TYPES[t][0]) for a, t in schema] + [("_epoch", pa.int64()), ("_op", pa.int8())]
    return pa.table({name: pa.array(col, type=ty) for (name, ty), col in zip(fields, columns, strict=True)})


def canonical(tuples: list[tuple[Any, ...]]) -> list[str]:
    return sorted(repr(t) for t in tuples)  # NaN != NaN, but its repr is one string


@settings(max_examples=300, deadline=None)
@given(logs())
def test_the_arrow_path_keeps_what_the_row_path_keeps(log: Any) -> None:
    schema, rows = log
    got = latest_of_table(table(schema, rows), schema)
    assert canonical(got) == canonical(latest_of_rows(rows, schema))
    assert len(set(map(repr, got))) == len(got), "a tuple is answered once"


def test_a_delete_after_an_insert_in_a_later_epoch_removes_and_a_tie_keeps() -> None:
    schema = (("a", "int"), ("b", "string"))
    rows = [(1, "x", 1, 1), (1, "x", 2, -1), (2, "y", 3, -1), (2, "y", 3, 1), (3, "z", 1, 1), (3, "z", 2, 1)]
    assert sorted(latest_of_table(table(schema, rows), schema)) == [(2, "y"), (3, "z")]
