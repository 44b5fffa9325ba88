"""Columnar writes (`SourceChanges.insert_columns` / `delete_columns`) through the real server:
the same outcome as the row form for the same rows, good or bad (same status, same message,
same rows read back); every value type round-trips; the client sends columns by default;
misaligned or repeated columns are refused and change nothing."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pomoview.client import Client, InvalidArgument, PomoviewError, messages
from pomoview.client.values import INT64_MAX, INT64_MIN, Cid
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

from .server_process import ServerProcess

PROGRAM = """
source t(k: int, i: int, f: float, s: string, b: bool, y: bytes).
view byK(k).
byK(k: K, i: I, f: F, s: S, b: B, y: Y) :- t(k: K, i: I, f: F, s: S, b: B, y: Y).
"""
# A source cannot declare a cid attribute (install refuses it), so cid values go only where
# they are the wrong type; the client's tests round-trip them through the columnar form.
ATTRIBUTES = ("i", "f", "s", "b", "y")

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "int": st.integers(INT64_MIN, INT64_MAX),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "str": st.text(max_size=8),
    "bool": st.booleans(),
    "bytes": st.binary(max_size=8),
    "cid": st.text(alphabet="abcdefghijklmnopqrstuvwxyz234567", max_size=12).map(lambda s: Cid("b" + s)),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = Path(tmp_path_factory.mktemp("columnar")) / "data"
    # No flush: the test is about the write path, and nothing here needs Parquet.
    srv = ServerProcess(data, flush_interval=3600).start()
    with srv.client() as db:
        db.install(PROGRAM)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def db(server: ServerProcess) -> Iterator[Client]:
    with server.client() as client:
        yield client


_keys = itertools.count(1)


def _send(db: Client, rows: list[dict[str, Any]], columnar: bool) -> tuple[str, str, int]:
    """Writes `rows` into t in one form; returns ("OK", "", epoch) or (status name, message, 0)."""
    request = messages.write_request({"t": (rows, ())}, columnar=columnar)
    side = request.changes[0]
    assert (side.HasField("insert_columns"), len(side.inserts) > 0) == (columnar, not columnar)
    try:
        epoch = db._call(db._stub.Write, request).epoch
    except PomoviewError as err:
        return err.code.name, str(err), 0
    return "OK", "", epoch


def _comparable(rows: list[dict[str, object]]) -> list[tuple[tuple[str, object], ...]]:
    """Rows without k, floats by repr (NaN equals NaN), sorted: for comparing answers."""
    out = [
        tuple((a, repr(v) if isinstance(v, float) else v) for a, v in sorted(row.items()) if a != "k")
        for row in rows
    ]
    return sorted(out, key=repr)


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[str | None], str | None, list[list[Any]]]:
    """A batch's shape (each attribute's Python type or None for missing, and an extra
    attribute or None) and its rows' values: every attribute has one type in all rows, so the
    batch fits the columnar form; the type is the declared one most of the time."""
    declared = {"i": "int", "f": "float", "s": "str", "b": "bool", "y": "bytes"}
    kinds: list[str | None] = []
    for a in ATTRIBUTES:
        right = draw(st.integers(0, 5)) > 0
        kinds.append(declared[a] if right else draw(st.sampled_from([None, *VALUES])))
    extra = draw(st.sampled_from([None, None, None, "extra", "", "K"]))
    n = draw(st.integers(1, 4))
    extra_kind = draw(st.sampled_from(list(VALUES))) if extra is not None else None
    rows = [[draw(VALUES[k]) if k else None for k in [*kinds, extra_kind]] for _ in range(n)]
    return kinds, extra, rows


def _dicts(shape: tuple[list[str | None], str | None, list[list[Any]]], key: int) -> list[dict[str, Any]]:
    kinds, extra, values = shape
    out = []
    for row in values:
        d: dict[str, Any] = {"k": key}
        for a, kind, v in zip(ATTRIBUTES, kinds, row, strict=False):
            if kind is not None:
                d[a] = v
        if extra is not None:
            d[extra] = row[-1]
        out.append(d)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=batches())
def test_columns_and_rows_have_the_same_outcome(db: Client, shape: Any) -> None:
    k_rows, k_cols = next(_keys), next(_keys)
    by_rows = _send(db, _dicts(shape, k_rows), columnar=False)
    by_cols = _send(db, _dicts(shape, k_cols), columnar=True)
    assert by_cols[:2] == by_rows[:2]
    if by_rows[0] == "OK":
        got_rows = db.lookup("byK", {"k": k_rows}, min_epoch=by_rows[2])
        got_cols = db.lookup("byK", {"k": k_cols}, min_epoch=by_cols[2])
        assert got_rows and _comparable(got_cols) == _comparable(got_rows)
    else:
        # A type error shows in row 0 (every row has its types); a NaN in the row that holds it.
        assert by_rows[0] == "INVALID_ARGUMENT"
        assert "t inserts[0]: " in by_rows[1] or " is NaN, which equals no value" in by_rows[1], by_rows


def _recording(db: Client) -> list[Any]:
    """Makes `db` record every request it sends (a client interceptor on its real channel)."""
    sent: list[Any] = []

    class Record(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
        def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
            sent.append(request)
            return continuation(details, request)

    db._stub = pb_grpc.ViewServiceStub(grpc.intercept_channel(db._channel, Record()))
    return sent


def test_every_value_type_round_trips_as_columns(server: ServerProcess) -> None:
    k = next(_keys)
    floats = [0.5, -0.0, math.inf, -math.inf, 1.5e-300, 1e308, 5e-324]  # NaN is refused: below
    rows = [
        {
            "k": k,
            "i": [INT64_MIN, INT64_MAX, 0, -1, 7, 2**40, 3][j],
            "f": floats[j],
            "s": ["", "é", "a\x00b", "😀", "x" * 100, "NaN", "1"][j],
            "b": j % 2 == 0,
            "y": [b"", b"\x00", b"\xff\xfe", bytes(range(256)), b"a", b"b", b"c"][j],
        }
        for j in range(7)
    ]
    with server.client() as db:
        sent = _recording(db)
        epoch = db.write("t", insert=rows)
        # The client's default is the columnar form; a silent fall back to rows fails here.
        (request,) = sent
        (change,) = request.changes
        assert change.HasField("insert_columns") and not change.inserts
        assert [c.WhichOneof("values") for c in change.insert_columns.columns] == [
            "int_values", "int_values", "float_values", "string_values", "bool_values",
            "bytes_values",
        ]
        got = db.lookup("byK", {"k": k}, min_epoch=epoch)
    assert _comparable(got) == _comparable(rows)


def test_ints_in_a_float_column_and_bytearray(db: Client) -> None:
    k = next(_keys)
    rows = [
        {"k": k, "i": j, "f": j, "s": "s", "b": True, "y": bytearray(b"ab") if j else b"cd"}
        for j in range(3)
    ]
    request = messages.write_request({"t": (rows, ())})
    assert request.changes[0].HasField("insert_columns")
    epoch = db._call(db._stub.Write, request).epoch
    got = db.lookup("byK", {"k": k}, min_epoch=epoch)
    assert sorted((r["f"], r["y"]) for r in got) == [(0.0, b"cd"), (1.0, b"ab"), (2.0, b"ab")]
    assert all(type(r["f"]) is float for r in got)


def _columns(**named: list[int]) -> pb.Columns:
    return pb.Columns(
        columns=[pb.Column(name=n, int_values=pb.Column.Ints(values=v)) for n, v in named.items()]
    )


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            pb.SourceChanges(source="t", insert_columns=_columns(k=[1, 2, 3], i=[1, 2])),
            "t inserts: column 'i' has 2 values, column 'k' has 3",
        ),
        (
            pb.SourceChanges(
                source="t",
                delete_columns=pb.Columns(
                    columns=[*_columns(k=[1]).columns, pb.Column(name="i")]
                ),
            ),
            "t deletes: column 'i' has 0 values, column 'k' has 1",
        ),
        (
            pb.SourceChanges(source="t", insert_columns=_columns(k=[1], i=[1], f=[1], s=[2], b=[3], y=[4])),
            "t inserts[0]: attribute 's': expected string, got int 2",
        ),
        (
            pb.SourceChanges(
                source="t",
                insert_columns=pb.Columns(columns=[*_columns(k=[1]).columns, *_columns(k=[2]).columns]),
            ),
            "t inserts: column 'k' is given twice",
        ),
        (
            pb.SourceChanges(
                source="t",
                inserts=[pb.Row(fields={"k": pb.Value(int_value=1)})],
                insert_columns=_columns(k=[1]),
            ),
            "changes[0]: inserts are given both as rows and as insert_columns",
        ),
    ],
)
def test_bad_columns_are_refused_and_change_nothing(
    db: Client, change: pb.SourceChanges, needle: str
) -> None:
    before = db.stats()["durable_epoch"]
    with pytest.raises(InvalidArgument) as err:
        db._call(db._stub.Write, pb.WriteRequest(changes=[change]))
    assert str(err.value) == needle
    assert db.stats()["durable_epoch"] == before


def test_nan_is_refused_in_both_forms_with_the_same_message(db: Client) -> None:
    """NaN equals nothing, itself included: a row holding it could never be deleted."""
    k = next(_keys)
    rows = [{"k": k, "i": j, "f": [1.0, math.nan][j], "s": "s", "b": True, "y": b""} for j in range(2)]
    messages_seen = []
    for columnar in (True, False):
        request = messages.write_request({"t": (rows, ())}, columnar=columnar)
        assert request.changes[0].HasField("insert_columns") is columnar
        with pytest.raises(InvalidArgument) as err:
            db._call(db._stub.Write, request)
        messages_seen.append(str(err.value))
    assert messages_seen[0] == messages_seen[1]
    assert "changes[0].inserts[1]: attribute 'f' is NaN" in messages_seen[0]
    assert db.lookup("byK", {"k": k}) == []
