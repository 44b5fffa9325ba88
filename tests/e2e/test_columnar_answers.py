"""Columnar lookup answers (`LookupRequest.columnar`, `key_columns`; `LookupResponse.columns`,
`row_counts`) through the real server: for random rows of every attribute type, the columnar
answer decodes to the very rows the row form gives (the oracle), through `Client` and through
raw requests; the keys may go as rows or columns either way; a request of an older client
(rows, no flag) still gets rows; bad key columns are refused with INVALID_ARGUMENT naming what
and where; the CLI reads through the columnar form."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pomoview.client import Cid, Client, InvalidArgument, messages
from pomoview.client.values import INT64_MAX, INT64_MIN
from pomoview.planner.frontend.cid import cid
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.cli.commands import main

from .server_process import ServerProcess

PROGRAM = """
source t(k: int, i: int, f: float, s: string, b: bool, y: bytes, c: cid).
source key(k: int).
view byK(k).
view byKS(k, s).
view byC(c).
view sums(k).
byK(k: K, i: I, f: F, s: S, b: B, y: Y, c: C) :- t(k: K, i: I, f: F, s: S, b: B, y: Y, c: C).
byKS(k: K, s: S, i: I) :- t(k: K, i: I, s: S).
byC(c: C, k: K) :- t(k: K, c: C).
sums(k: K, total: T, n: N) :- key(k: K), T := sum F : t(k: K, f: F), N := count : t(k: K).
view untyped(x).
untyped(x: X) :- untyped(x: X).
"""
CIDS = [Cid(cid("blob", [("n", i)])) for i in range(8)]
ROW = {
    "i": st.integers(INT64_MIN, INT64_MAX),
    # NaN is refused in writes; it reaches answers as a sum of inf and -inf (sums below).
    "f": st.floats(allow_nan=False, allow_infinity=True),
    "s": st.text(max_size=6),
    "b": st.booleans(),
    "y": st.binary(max_size=6),
    "c": st.sampled_from(CIDS),
}
_keys = itertools.count(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = Path(tmp_path_factory.mktemp("columnar-answers")) / "data"
    srv = ServerProcess(data, flush_interval=3600).start()
    with srv.client() as db:
        db.install(PROGRAM)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def clients(server: ServerProcess) -> Iterator[tuple[Client, Client]]:
    """(columnar, rows): the same server through a client of each form."""
    with server.client() as columnar, server.client(columnar=False) as rows:
        yield columnar, rows


def _same(answer: Any) -> Any:
    """An answer, floats by repr (NaN equals NaN), keeping each dict's name order and each
    value's type: what the two forms must agree on exactly."""
    if isinstance(answer, dict):
        return [
            (k, type(v).__name__, repr(v) if isinstance(v, float) else _same(v)) for k, v in answer.items()
        ]
    if isinstance(answer, list):
        return [_same(v) for v in answer]
    return answer


def _raw(db: Client, request: pb.LookupRequest) -> pb.LookupResponse:
    response: pb.LookupResponse = db._call(db._stub.Lookup, request)
    return response


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    groups=st.lists(st.lists(st.fixed_dictionaries(ROW), max_size=4), min_size=1, max_size=5), data=st.data()
)
def test_columns_decode_to_the_rows_of_the_row_form(
    clients: tuple[Client, Client], groups: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    columnar, rows = clients
    ks = [next(_keys) for _ in groups]
    inserts = [{"k": k, **row} for k, group in zip(ks, groups, strict=True) for row in group]
    epoch = columnar.write("t", insert=inserts) if inserts else 0
    # Keys of 0..4 rows, repeated ones, and one never written (no row).
    asked = data.draw(st.lists(st.sampled_from([*ks, 0]), min_size=1, max_size=8))
    keys = [{"k": k} for k in asked]
    want = rows.lookup_many("byK", keys, min_epoch=epoch)
    got = columnar.lookup_many("byK", keys, min_epoch=epoch)
    assert list(got) == list(want) and _same(list(got.values())) == _same(list(want.values()))
    for k in dict.fromkeys(asked):
        assert _same(columnar.lookup("byK", {"k": k})) == _same(rows.lookup("byK", {"k": k}))
    # Both forms for real: the columnar answer has no `results`, the row form no `columns`.
    by_columns = _raw(columnar, messages.lookup_request("byK", keys, None, columnar=True))
    by_rows = _raw(columnar, messages.lookup_request("byK", keys, None, columnar=False))
    assert by_columns.HasField("columns") and not by_columns.results
    assert not by_rows.HasField("columns") and len(by_rows.results) == len(keys)
    assert list(by_columns.row_counts) == [len(r.rows) for r in by_rows.results]
    assert [c.name for c in by_columns.columns.columns] == ["k", "i", "f", "s", "b", "y", "c"]


def test_floats_that_only_computations_make(clients: tuple[Client, Client]) -> None:
    """NaN (inf + -inf) and an int 0 where a float is declared (the sum of no row) travel as
    floats in both forms."""
    columnar, rows = clients
    nan_k, empty_k = next(_keys), next(_keys)
    row = {"i": 1, "s": "", "b": True, "y": b"", "c": CIDS[0]}
    columnar.write(
        "t", insert=[{"k": nan_k, "f": math.inf, **row}, {"k": nan_k, "f": -math.inf, **row, "i": 2}]
    )
    epoch = columnar.write("key", insert=[{"k": nan_k}, {"k": empty_k}])
    keys = [{"k": nan_k}, {"k": empty_k}]
    got = columnar.lookup_many("sums", keys, min_epoch=epoch)
    assert _same(list(got.values())) == _same(list(rows.lookup_many("sums", keys).values()))
    (nan_row,) = got[(nan_k,)]
    (empty_row,) = got[(empty_k,)]
    assert math.isnan(nan_row["total"]) and nan_row["n"] == 2
    assert empty_row == {"k": empty_k, "n": 0, "total": 0.0} and type(empty_row["total"]) is float


def test_keys_of_every_form_and_type(clients: tuple[Client, Client]) -> None:
    """Keys as rows or as columns, answers as rows or as columns: the same rows; keys of two
    attributes, of a cid, of ints sent for a float-free key."""
    columnar, rows = clients
    k = next(_keys)
    inserts = [
        {"k": k, "i": j, "f": 0.5, "s": s, "b": False, "y": b"", "c": CIDS[j]} for j, s in enumerate("aéb")
    ]
    epoch = columnar.write("t", insert=inserts)
    for view, keys in [
        ("byKS", [{"k": k, "s": "é"}, {"k": k, "s": "zz"}, {"k": k, "s": "a"}]),
        ("byC", [{"c": CIDS[1]}, {"c": CIDS[7]}]),
    ]:
        answers = []
        for keys_as_columns, answer_in_columns in itertools.product([False, True], repeat=2):
            request = messages.lookup_request(view, keys, epoch, columnar=keys_as_columns)
            request.columnar = answer_in_columns
            response = _raw(columnar, request)
            assert response.HasField("columns") == answer_in_columns
            assert request.HasField("key_columns") == keys_as_columns
            answers.append(
                _same(list(messages.lookup_result(response, messages.key_tuples(keys), None).values()))
            )
        assert answers[1:] == answers[:1] * 3, view
    by_cid = columnar.lookup("byC", {"c": CIDS[2]})  # other tests' rows hold it too
    assert {"c": CIDS[2], "k": k} in by_cid and all(type(r["c"]) is Cid for r in by_cid)


def test_a_view_of_an_untyped_attribute_is_answered_in_rows(clients: tuple[Client, Client]) -> None:
    """`untyped.x` has no declared type (`any`), so no column type: a columnar request gets
    rows, which the client reads without taking the server for an older one."""
    columnar, _ = clients
    assert columnar.lookup("untyped", {"x": 1}) == [] and columnar.lookup_many("untyped", [{"x": 2}]) == {
        (2,): []
    }
    response = _raw(columnar, messages.lookup_request("untyped", [{"x": 1}], None, columnar=True))
    assert not response.HasField("columns") and len(response.results) == 1
    assert columnar.columnar, "still asking in columns"


def test_an_older_clients_request_gets_rows(clients: tuple[Client, Client]) -> None:
    columnar, _ = clients
    k = next(_keys)
    epoch = columnar.write(
        "t", insert=[{"k": k, "i": 5, "f": 1.0, "s": "x", "b": True, "y": b"z", "c": CIDS[3]}]
    )
    key = pb.Row(fields={"k": pb.Value(int_value=k)})
    response = _raw(columnar, pb.LookupRequest(view="byK", keys=[key], min_epoch=epoch))
    assert not response.HasField("columns") and not response.row_counts
    (key_rows,) = response.results
    (row,) = key_rows.rows
    assert row.fields["s"].string_value == "x" and row.fields["c"].cid_value == CIDS[3]


def _int_column(name: str, values: list[int]) -> pb.Column:
    return pb.Column(name=name, int_values=pb.Column.Ints(values=values))


@pytest.mark.parametrize(
    ("view", "request_fields", "needle"),
    [
        (
            "byK",
            {
                "keys": [pb.Row(fields={"k": pb.Value(int_value=1)})],
                "key_columns": pb.Columns(columns=[_int_column("k", [1])]),
            },
            "the keys are given both as rows (keys) and as key_columns",
        ),
        (
            "byK",
            {
                "key_columns": pb.Columns(
                    columns=[pb.Column(name="k", string_values=pb.Column.Strings(values=["1"]))]
                )
            },
            "key_columns[0]: attribute 'k': expected int, got string '1'",
        ),
        (
            "byKS",
            {
                "key_columns": pb.Columns(
                    columns=[
                        _int_column("k", [1, 2]),
                        pb.Column(name="s", string_values=pb.Column.Strings(values=["a"])),
                    ]
                )
            },
            "key_columns: column 's' has 1 values, column 'k' has 2",
        ),
        (
            "byKS",
            {
                "key_columns": pb.Columns(
                    columns=[
                        _int_column("k", []),
                        pb.Column(name="s", string_values=pb.Column.Strings(values=["a"])),
                    ]
                )
            },
            "key_columns: column 's' has 1 values, column 'k' has 0",
        ),
        (
            "byK",
            {"key_columns": pb.Columns(columns=[_int_column("k", [1]), _int_column("k", [2])])},
            "key_columns: column 'k' is given twice",
        ),
        (
            "byK",
            {"key_columns": pb.Columns(columns=[_int_column("nope", [1])])},
            "'byK' has no attribute 'nope' (it has k, i, f, s, b, y, c)",
        ),
        (
            "sums",
            {
                "key_columns": pb.Columns(
                    columns=[
                        _int_column("k", [1, 2]),
                        pb.Column(name="total", float_values=pb.Column.Floats(values=[1.0, math.nan])),
                    ]
                )
            },
            "key_columns[1]: attribute 'total' is NaN, which equals no value",
        ),
        (
            "byC",
            {
                "key_columns": pb.Columns(
                    columns=[
                        pb.Column(name="c", cid_values=pb.Column.Cids(values=[CIDS[0], "bafy-not-a-cid"]))
                    ]
                )
            },
            "key_columns[1]: attribute 'c': 'bafy-not-a-cid' is not a CID",
        ),
    ],
)
def test_bad_key_columns_are_refused(
    clients: tuple[Client, Client], view: str, request_fields: dict[str, Any], needle: str
) -> None:
    columnar, _ = clients
    for answer_in_columns in (True, False):
        request = pb.LookupRequest(view=view, columnar=answer_in_columns, **request_fields)
        with pytest.raises(InvalidArgument) as info:
            _raw(columnar, request)
        assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert needle in str(info.value), str(info.value)


def test_the_cli_reads_through_columns(server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    k = next(_keys)
    with server.client() as db:
        epoch = db.write(
            "t", insert=[{"k": k, "i": 9, "f": 2.5, "s": "☃", "b": False, "y": b"", "c": CIDS[4]}]
        )
    argv = ["lookup", "byKS", f"k={k}", 's="☃"', "--min-epoch", str(epoch), "--address", server.address]
    assert main(argv) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [{"i": 9, "k": k, "s": "☃"}]
