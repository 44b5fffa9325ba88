"""lookup_many's dict and the answers' to_arrow() / to_pandas(), against the fake server of
fake_server.py (it answers each key with two rows built from the key)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pytest
from fake_server import FakeViewService, request_keys

from pomoview.client import AsyncClient, Client, InvalidArgument, MissingExtra, Rows, RowsByKey

VIEW = "articleWithVotes"  # the fake's relations declare it as (id: int, title: string, votes: int)


def flat(result: RowsByKey) -> list[dict[str, object]]:
    return [row for rows in result.values() for row in rows]


# ---------------------------------------------------------------- lookup_many's dict


def test_lookup_many_is_keyed_by_value_tuples_in_first_asked_order(
    address: str, fake: FakeViewService
) -> None:
    with Client(address) as db:
        got = db.lookup_many(VIEW, [{"id": 3}, {"id": 1}, {"id": 3}, {"id": 2}, {"id": 1}])
    assert isinstance(got, RowsByKey) and isinstance(got, dict)
    assert list(got) == [(3,), (1,), (2,)]  # a key asked twice is there once, where first asked
    for (key,), rows in got.items():
        assert isinstance(rows, Rows)
        assert sorted(rows, key=lambda r: str(r["votes"])) == [
            {"id": key, "title": "a", "votes": 1},
            {"id": key, "title": "b", "votes": 2},
        ]
    # The request is sent as asked: the dict only folds the repeats of the answer.
    assert request_keys(fake.requests[0]) == [{"id": i} for i in (3, 1, 3, 2, 1)]


def test_lookup_many_tuples_follow_the_first_keys_attribute_order(address: str) -> None:
    with Client(address) as db:
        got = db.lookup_many("pair", [{"b": "x", "a": 1}, {"a": 2, "b": "y"}, {"b": "x", "a": 1}])
    assert list(got) == [("x", 1), ("y", 2)]
    assert {(r["a"], r["b"]) for r in got[("y", 2)]} == {(2, "y")}


def test_lookup_many_keys_naming_other_attributes_are_refused_before_sending(
    address: str, fake: FakeViewService
) -> None:
    with Client(address) as db, pytest.raises(InvalidArgument, match=r"keys\[1\] names \['id', 'x'\]"):
        db.lookup_many(VIEW, [{"id": 1}, {"id": 2, "x": 0}])
    assert fake.requests == []


def test_lookup_many_bytearray_values_key_as_bytes(address: str) -> None:
    with Client(address) as db:
        got = db.lookup_many("blobs", [{"h": bytearray(b"\x01")}, {"h": b"\x01"}])
        two = db.lookup_many("blobs", [{"h": bytearray(b"\x01"), "n": 1}, {"n": 1, "h": b"\x02"}])
    assert list(got) == [(b"\x01",)]
    assert list(two) == [(b"\x01", 1), (b"\x02", 1)]


def test_async_lookup_many_has_the_same_dict(address: str) -> None:
    async def scenario() -> RowsByKey:
        async with AsyncClient(address) as db:
            await db.install("p")
            return await db.lookup_many(VIEW, [{"id": 6}, {"id": 5}, {"id": 6}])

    got = asyncio.run(scenario())
    assert list(got) == [(6,), (5,)] and {r["id"] for r in got[(5,)]} == {5}
    assert got.to_arrow().column_names == ["id", "title", "votes"]  # typed from install()


# ---------------------------------------------------------------- to_arrow / to_pandas


def test_to_arrow_infers_types_when_the_client_knows_no_program(address: str) -> None:
    with Client(address) as db:
        rows = db.lookup(VIEW, {"id": 7})
        many = db.lookup_many(VIEW, [{"id": 8}, {"id": 7}])
    table = rows.to_arrow()
    assert table.to_pylist() == list(rows)
    assert table.schema == pa.schema([("id", pa.int64()), ("title", pa.string()), ("votes", pa.int64())])
    assert many.to_arrow().to_pylist() == flat(many) and many.to_arrow().num_rows == 4


def test_to_arrow_uses_the_views_attributes_from_install_or_describe(address: str) -> None:
    with Client(address) as db:
        db.install("p")
        many = db.lookup_many(VIEW, [{"id": 2}, {"id": 1}])
        empty = db.lookup_many(VIEW, [])
    with Client(address) as db:
        db.describe()
        rows = db.lookup(VIEW, {"id": 4})
    want = pa.schema([("id", pa.int64()), ("title", pa.string()), ("votes", pa.int64())])
    assert many.to_arrow().schema == want and rows.to_arrow().schema == want
    assert many.to_arrow().to_pylist() == flat(many)
    assert rows.to_arrow().to_pylist() == list(rows)
    # An empty answer still has the view's columns, which inference could not give it.
    assert empty.to_arrow().schema == want and empty.to_arrow().num_rows == 0


def test_to_arrow_types_every_pomologic_type() -> None:
    rows = Rows([{"i": 1, "f": 1.5, "s": "x", "c": "bafy", "t": True, "b": b"\x00"}])
    rows.attributes = (
        ("i", "int"), ("f", "float"), ("s", "string"), ("c", "cid"), ("t", "bool"), ("b", "bytes")
    )
    table = rows.to_arrow()
    assert [f.type for f in table.schema] == [
        pa.int64(), pa.float64(), pa.string(), pa.string(), pa.bool_(), pa.binary()
    ]
    assert table.column_names == ["i", "f", "s", "c", "t", "b"] and table.to_pylist() == list(rows)


def test_to_arrow_with_stale_attributes_falls_back_to_inference() -> None:
    # Attributes from before another client installed a new program: names or types differ.
    renamed = Rows([{"id": 1, "name": "x"}])
    renamed.attributes = (("id", "int"), ("title", "string"))
    retyped = Rows([{"id": 1, "title": "x"}])
    retyped.attributes = (("id", "int"), ("title", "int"))
    assert renamed.to_arrow().to_pylist() == list(renamed)
    assert retyped.to_arrow().schema == pa.schema([("id", pa.int64()), ("title", pa.string())])


def test_to_pandas_matches_the_rows(address: str) -> None:
    with Client(address) as db:
        db.install("p")
        rows = db.lookup(VIEW, {"id": 9})
        many = db.lookup_many(VIEW, [{"id": 9}, {"id": 10}])
    frame = rows.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["id", "title", "votes"] and str(frame["votes"].dtype) == "int64"
    assert frame.to_dict("records") == list(rows)
    assert many.to_pandas().to_dict("records") == flat(many)


def test_answers_stay_plain_lists_and_dicts(address: str) -> None:
    with Client(address) as db:
        rows = db.lookup(VIEW, {"id": 1})
        many = db.lookup_many(VIEW, [{"id": 1}])
    assert isinstance(rows, list) and rows == list(rows) and many == {(1,): list(rows)}


# ---------------------------------------------------------------- without pyarrow / pandas


def test_to_arrow_without_pyarrow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = Rows([{"id": 1}])
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` now fails
    with pytest.raises(MissingExtra, match=r"to_arrow\(\) needs pyarrow: pip install 'pomoview\[arrow\]'"):
        rows.to_arrow()
    with pytest.raises(ImportError, match=r"pomoview\[arrow\]"):
        RowsByKey({(1,): rows}).to_arrow()
    # to_pandas converts through Arrow: without pyarrow it names the pandas extra, which has both.
    with pytest.raises(MissingExtra, match=r"to_pandas\(\) needs pyarrow: pip install 'pomoview\[pandas\]'"):
        rows.to_pandas()


def test_to_pandas_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtra, match=r"to_pandas\(\) needs pandas: pip install 'pomoview\[pandas\]'"):
        Rows([{"id": 1}]).to_pandas()


def test_the_client_imports_without_pyarrow_or_pandas() -> None:
    script = (
        "import sys\n"
        "sys.modules['pyarrow'] = sys.modules['pandas'] = None\n"
        "from pomoview.client import Client, Rows\n"
        "assert Rows([{'a': 1}]) == [{'a': 1}]\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
