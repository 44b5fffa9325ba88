"""Client, AsyncClient and the CLI against a real in-process gRPC server, the fake of
fake_server.py (its fixtures are in conftest.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import grpc
import pytest
from fake_server import LOOKUP_ABORTS, FakeViewService, request_keys

from pomoview.client import (
    AsyncClient,
    Cid,
    Client,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PomoviewError,
    Unavailable,
)
from pomoview.client.values import columns_to_rows, row_to_dict
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.api.security import ServerSecurity
from pomoview.server.cli.commands import main
from pomoview.server.limits.requests import LIMITS, Limits
from pomoview.server.spark.conf import SparkConf

# ---------------------------------------------------------------- sync client


def test_install_sends_program_and_returns_relations(address: str, fake: FakeViewService) -> None:
    with Client(address) as db:
        rels = db.install("source vote(article_id: int, user_id: int).", filename="v.pomo")
    assert fake.requests == [
        pb.InstallRequest(program="source vote(article_id: int, user_id: int).", filename="v.pomo")
    ]
    assert rels[1] == {
        "name": "articleWithVotes",
        "kind": "derived",
        "is_view": True,
        "key": ["id"],
        "attributes": [
            {"name": "id", "type": "int"},
            {"name": "title", "type": "string"},
            {"name": "votes", "type": "int"},
        ],
    }
    assert rels[0]["is_view"] is False and rels[0]["key"] == []


def test_install_error_is_invalid_argument_with_message(address: str) -> None:
    with Client(address) as db, pytest.raises(InvalidArgument) as info:
        db.install("syntax error", filename="bad.pomo")
    err = info.value
    assert str(err) == "bad.pomo:1:5: unexpected token"
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details == str(err)
    assert err.metadata.get("pomoview-position") == "bad.pomo:1:5"
    assert isinstance(err, PomoviewError)


def test_write_and_write_batch_requests(address: str, fake: FakeViewService) -> None:
    with Client(address) as db:
        e1 = db.write(
            "vote",
            insert=[{"article_id": 1, "user_id": 7}],
            delete=[{"article_id": 2, "user_id": 8}],
        )
        e2 = db.write_batch(
            {
                "article": ([{"id": 1, "title": "x", "ref": Cid("bafy")}], []),
                "vote": (iter([{"article_id": 1, "user_id": 9}]), ()),
            }
        )
    assert e2 == e1 + 1
    first, second = fake.requests
    # Rows of one shape go as columns (the client's default); each side decodes back to them.
    (change,) = first.changes
    assert change.source == "vote" and not change.inserts and not change.deletes
    assert columns_to_rows(change.insert_columns) == [{"article_id": 1, "user_id": 7}]
    assert columns_to_rows(change.delete_columns) == [{"article_id": 2, "user_id": 8}]
    assert [c.source for c in second.changes] == ["article", "vote"]
    assert second.changes[0].insert_columns.columns[2].cid_values.values == ["bafy"]
    assert columns_to_rows(second.changes[1].insert_columns) == [{"article_id": 1, "user_id": 9}]
    assert not second.changes[1].deletes and not second.changes[1].HasField("delete_columns")


def test_write_unknown_source_is_not_found(address: str) -> None:
    with Client(address) as db, pytest.raises(NotFound, match="unknown source 'nosuch'"):
        db.write("nosuch", insert=[{"a": 1}])


def test_lookup_and_min_epoch(address: str, fake: FakeViewService) -> None:
    with Client(address) as db:
        rows = db.lookup("articleWithVotes", {"id": 1}, min_epoch=3)
        db.lookup("articleWithVotes", {"id": 1})
    assert sorted(rows, key=lambda r: str(r["votes"])) == [
        {"id": 1, "votes": 1, "title": "a"},
        {"id": 1, "votes": 2, "title": "b"},
    ]
    with_epoch, without = fake.requests
    assert with_epoch.view == "articleWithVotes"
    assert request_keys(with_epoch) == [{"id": 1}] and with_epoch.columnar
    assert with_epoch.HasField("min_epoch") and with_epoch.min_epoch == 3
    # min_epoch=None must leave the optional field unset, not send 0.
    assert not without.HasField("min_epoch")


def test_lookup_many_keeps_key_order(address: str, fake: FakeViewService) -> None:
    with Client(address) as db:
        results = db.lookup_many("articleWithVotes", [{"id": 3}, {"id": 1}, {"id": 2}])
        assert db.lookup_many("articleWithVotes", []) == {}
    assert list(results) == [(3,), (1,), (2,)]
    assert [[r["id"] for r in rows] for rows in results.values()] == [[3, 3], [1, 1], [2, 2]]
    assert len(fake.requests) == 1  # the empty lookup never reached the server


def test_lookup_result_count_mismatch_is_refused(address: str) -> None:
    with Client(address) as db, pytest.raises(PomoviewError, match="1 results for 2 keys"):
        db.lookup_many("short", [{"id": 1}, {"id": 2}])


@pytest.mark.parametrize(
    ("view", "cls"),
    [
        ("missing", NotFound),
        ("spark", Unavailable),
        ("noprogram", FailedPrecondition),
        ("future", OutOfRange),
    ],
)
def test_status_codes_map_to_classes(address: str, view: str, cls: type[PomoviewError]) -> None:
    with Client(address) as db, pytest.raises(cls) as info:
        db.lookup(view, {"id": 1})
    assert str(info.value) == LOOKUP_ABORTS[view][1]
    assert info.value.code == LOOKUP_ABORTS[view][0]


def test_unmapped_code_falls_back_to_base_class(address: str) -> None:
    with Client(address) as db, pytest.raises(PomoviewError) as info:
        db.lookup("internal", {"id": 1})
    assert type(info.value) is PomoviewError
    assert info.value.code == grpc.StatusCode.INTERNAL and str(info.value) == "boom"


def test_timeout_is_deadline_exceeded(address: str) -> None:
    with Client(address, timeout=0.1) as db, pytest.raises(DeadlineExceeded):
        db.lookup("slow", {"id": 1})


def test_describe_and_stats(address: str) -> None:
    with Client(address) as db:
        desc = db.describe()
        stats = db.stats()
    assert desc["program"] == "source vote(...)."
    assert isinstance(desc["relations"], list) and len(desc["relations"]) == 2
    assert stats == {
        "applied_epoch": 5,
        "durable_epoch": 6,
        "flushed_epoch": 3,
        "upqueries": 2,
        "spark_jobs": 1,
        "dropped_deltas": 4,
        "apply_lag_seconds": 0.125,
        "apply_lag_epochs": 7,
        "replica_hits": 9,
        "states_epoch": 4,
        "spark": {
            "executors": 0,
            "status": "the Spark cluster spark://h:7077 has had no executor for this server for 4 s",
        },
        "readers": [
            {"view": "articleWithVotes", "key": ["id"], "partial": True, "present_keys": 10}
        ],
        "states": [
            {"id": "n0", "operator": "SourceIndex", "detail": "SourceIndex(vote by (article_id,))",
             "inputs": [], "stateful": True, "key": ["article_id"], "partial": True, "present_keys": 10,
             "rows": 31, "bytes": 4096, "dropped": 7, "upqueries": 10, "evictions": 0,
             "views": ["articleWithVotes"], "unmeasured": False},
            {"id": "n1", "operator": "Map", "detail": "Map", "inputs": ["n0"], "stateful": False, "key": [],
             "partial": False, "present_keys": 0, "rows": 0, "bytes": 0, "dropped": 0, "upqueries": 0,
             "evictions": 0, "views": [], "unmeasured": False},
        ],
        "memory": {"budget": 64 << 20, "rss_bytes": 90 << 20, "baseline_rss_bytes": 40 << 20,
                   "partial_state_bytes": 30 << 20, "eviction_rounds": 3},
    }


def test_wait_ready(address: str, dead_address: str) -> None:
    with Client(address) as db:
        db.wait_ready(5.0)
    with Client(dead_address) as db, pytest.raises(Unavailable, match=dead_address):
        db.wait_ready(0.2)


def test_connection_refused_is_unavailable(dead_address: str) -> None:
    with Client(dead_address, timeout=5.0) as db, pytest.raises(Unavailable):
        db.stats()


# ---------------------------------------------------------------- asyncio client


def test_async_client_same_requests_and_errors(address: str, fake: FakeViewService) -> None:
    async def scenario() -> None:
        async with AsyncClient(address) as db:
            await db.wait_ready(5.0)
            rels = await db.install("p", filename="a.pomo")
            assert [r["name"] for r in rels] == ["vote", "articleWithVotes"]
            epoch = await db.write("vote", insert=[{"article_id": 1, "user_id": 2}])
            assert (
                epoch == await db.write_batch({"vote": ([], [{"article_id": 1, "user_id": 2}])}) - 1
            )
            rows = await db.lookup("articleWithVotes", {"id": 4}, min_epoch=epoch)
            assert {r["votes"] for r in rows} == {1, 2}
            many = await db.lookup_many("articleWithVotes", [{"id": 5}, {"id": 6}])
            assert [rows[0]["id"] for rows in many.values()] == [5, 6] and list(many) == [(5,), (6,)]
            assert (await db.stats())["applied_epoch"] == 5
            assert (await db.describe())["program"] == "source vote(...)."
            with pytest.raises(InvalidArgument, match="a.pomo:1:5") as info:
                await db.install("syntax error", filename="a.pomo")
            assert info.value.metadata.get("pomoview-position") == "a.pomo:1:5"
            with pytest.raises(NotFound):
                await db.lookup("missing", {"id": 1})
        async with AsyncClient(address, timeout=0.1) as slow:
            with pytest.raises(DeadlineExceeded):
                await slow.lookup("slow", {"id": 1})

    asyncio.run(scenario())
    kinds = [type(r).__name__ for r in fake.requests]
    assert kinds[:7] == [
        "InstallRequest",
        "WriteRequest",
        "WriteRequest",
        "LookupRequest",
        "LookupRequest",
        "StatsRequest",
        "DescribeRequest",
    ]
    lookup = fake.requests[3]
    assert lookup.HasField("min_epoch") and request_keys(lookup) == [{"id": 4}]
    assert columns_to_rows(fake.requests[2].changes[0].delete_columns) == [
        {"article_id": 1, "user_id": 2}
    ]


def test_async_wait_ready_times_out(dead_address: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(dead_address) as db:
            with pytest.raises(Unavailable, match=dead_address):
                await db.wait_ready(0.2)

    asyncio.run(scenario())


# ---------------------------------------------------------------- CLI


def test_cli_install(
    address: str, fake: FakeViewService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = tmp_path / "votes.pomo"
    prog.write_text("source vote(article_id: int, user_id: int).")
    assert main(["install", str(prog), "--address", address]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "source vote(article_id: int, user_id: int)",
        "view articleWithVotes(id: int, title: string, votes: int) key (id)",
    ]
    assert fake.requests[0].filename == str(prog)


def test_cli_install_error(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prog = tmp_path / "bad.pomo"
    prog.write_text("syntax error")
    assert main(["install", str(prog), "--address", address]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: INVALID_ARGUMENT: {prog}:1:5: unexpected token"


def test_cli_write_one_batch(
    address: str, fake: FakeViewService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = tmp_path / "changes.jsonl"
    lines.write_text(
        '{"insert": {"article_id": 3, "user_id": 1}}\n\n'
        '{"delete": {"article_id": 4, "user_id": 1}}\n'
        '{"article_id": 5, "user_id": 1, "w": 0.5}\n'
    )
    argv = [
        "write",
        "vote",
        "--insert",
        '{"article_id": 1, "user_id": 7}',
        "--insert",
        '{"article_id": 2, "user_id": 7, "b": {"$bytes": "AAE="}}',
        "--delete",
        '{"article_id": 9, "user_id": 7}',
        "--file",
        str(lines),
        "--address",
        address,
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out == f"epoch {fake.epoch}\n"
    (req,) = fake.requests
    (ch,) = req.changes
    assert ch.source == "vote"
    # The inserts name different attributes, so they go as rows; the deletes fit columns.
    assert [row_to_dict(r) for r in ch.inserts] == [
        {"article_id": 1, "user_id": 7},
        {"article_id": 2, "user_id": 7, "b": b"\x00\x01"},
        {"article_id": 3, "user_id": 1},
        {"article_id": 5, "user_id": 1, "w": 0.5},
    ]
    assert columns_to_rows(ch.delete_columns) == [
        {"article_id": 9, "user_id": 7},
        {"article_id": 4, "user_id": 1},
    ]
    assert ch.inserts[3].fields["w"].WhichOneof("kind") == "float_value"
    assert ch.inserts[0].fields["user_id"].WhichOneof("kind") == "int_value"


@pytest.mark.parametrize(
    "key_args",
    [['{"id": 1, "flag": true, "name": "7"}'], ["id=1", "flag=true", 'name="7"']],
)
def test_cli_lookup(
    address: str, fake: FakeViewService, key_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["lookup", "articleWithVotes", *key_args, "--min-epoch", "2", "--address", address]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == sorted(out) and len(out) == 2
    assert [json.loads(line) for line in out] == [
        {"flag": True, "id": 1, "name": "7", "title": "a", "votes": 1},
        {"flag": True, "id": 1, "name": "7", "title": "b", "votes": 2},
    ]
    (req,) = fake.requests
    assert req.min_epoch == 2
    kinds = {c.name: c.WhichOneof("values") for c in req.key_columns.columns}
    assert kinds["flag"] == "bool_values" and kinds["name"] == "string_values"


def test_cli_lookup_pair_value_types(address: str, fake: FakeViewService) -> None:
    argv = ["lookup", "v", "i=-3", "f=2.5", "e=1e3", "s=abc", "t=false", "--address", address]
    assert main(argv) == 0
    assert request_keys(fake.requests[0]) == [
        {
            "i": -3,
            "f": 2.5,
            "e": 1000.0,
            "s": "abc",
            "t": False,
        }
    ]


def test_cli_lookup_not_found(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", "missing", "id=1", "--address", address]) == 1
    assert capsys.readouterr().err == "error: NOT_FOUND: unknown view 'missing'\n"


def test_cli_stats(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--json", "--address", address]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["durable_epoch"] == 6 and stats["readers"][0]["partial"] is True


def test_cli_stats_table(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One row per stateful node, with its key, mode and sizes; stateless nodes are left out."""
    assert main(["stats", "--address", address]) == 0
    counters, lag, states, replica, spark, memory, header, *rows = capsys.readouterr().out.splitlines()
    assert counters.startswith("applied_epoch 5, durable_epoch 6,") and "dropped_deltas 4" in counters
    assert lag == "apply lag: 0.125 s, 7 epochs"
    assert states == "states as of epoch 4 (read at the end of an earlier step)"
    assert replica == "hits answered by the hit replica: 9"
    assert spark == "spark: the Spark cluster spark://h:7077 has had no executor for this server for 4 s"
    assert memory == (
        "memory: rss 90 MiB (at start 40), budget 64 MiB, partial state ~30 MiB estimated, 3 eviction rounds"
    )
    assert header.split() == ["id", "operator", "key", "mode", "keys", "rows", "bytes", "dropped",
                              "upqueries", "evictions", "views"]
    assert [r.split() for r in rows] == [
        ["n0", "SourceIndex", "article_id", "partial", "10", "31", "4096", "7", "10", "0", "articleWithVotes"]
    ]


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_cli_output_into_a_closed_pipe_ends_quietly(address: str, buffered: bool) -> None:
    """`pomoview stats | head -0`: the reader is gone before the first write. The command
    ends with a SIGPIPE death's status and says nothing (no traceback, no "Exception
    ignored" from the interpreter's last flush), whether its stdout is block-buffered (a
    pipe's default: the write happens at the flush) or not (PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pomoview.server.cli", "stats", "--address", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # no reader left: the command's first write meets a broken pipe
    stderr = proc.stderr.read().decode()
    assert proc.wait(60) == 128 + signal.SIGPIPE, stderr
    assert stderr == ""


def test_cli_address_from_env(
    address: str, fake: FakeViewService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POMOVIEW_ADDRESS", address)
    assert main(["stats"]) == 0
    assert len(fake.requests) == 1


def test_cli_connection_refused_names_address(
    dead_address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stats", "--address", dead_address]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot connect to pomoview server at {dead_address}")


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "vote", "--insert", "{not json"],
        ["write", "vote", "--insert", "[1, 2]"],
        ["write", "vote", "--insert", '{"a": null}'],
        ["write", "vote", "--insert", '{"a": 9223372036854775808}'],
        ["lookup", "v", "noequals"],
        ["lookup", "v", "a=1", "a=2"],
        ["install", "/nonexistent/prog.pomo"],
    ],
)
def test_cli_usage_errors_exit_2(
    argv: list[str], fake: FakeViewService, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--address", "127.0.0.1:1"]) == 2
    assert "pomoview: error:" in capsys.readouterr().err
    assert fake.requests == []


def test_cli_argparse_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as info:
        main(["lookup", "v"])
    assert info.value.code == 2


def test_cli_serve_passes_arguments(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, object]] = []
    fake_app = types.ModuleType("pomoview.server.api.app")
    fake_app.serve = lambda **kw: calls.append(kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pomoview.server.api.app", fake_app)
    monkeypatch.setenv("POMOVIEW_SPARK_MASTER", "spark://h:7077")
    monkeypatch.delenv("POMOVIEW_DATA", raising=False)
    monkeypatch.delenv("POMOVIEW_STORE", raising=False)
    monkeypatch.delenv("POMOVIEW_FULL_STATE", raising=False)
    monkeypatch.delenv("POMOVIEW_BINARY_JOINS", raising=False)
    monkeypatch.delenv("POMOVIEW_WHOLE_SOURCE_ROWS", raising=False)
    monkeypatch.setenv("POMOVIEW_MEMORY_BUDGET", "1.5G")
    monkeypatch.setenv("POMOVIEW_SPARK_CONF", "spark.cores.max=2")
    for var in ("POMOVIEW_TOKEN", "POMOVIEW_TLS_CERT", "POMOVIEW_TLS_KEY", "POMOVIEW_TLS_CLIENT_CA",
                "POMOVIEW_SPARK_TIMEOUT", "POMOVIEW_SPARK_WRITE_TIMEOUT", "POMOVIEW_HIT_REPLICA",
                "POMOVIEW_SPARK_NICE",
                *(limit.env for limit in LIMITS)):
        monkeypatch.delenv(var, raising=False)
    assert main(["serve", "--port", "9000", "--program", "p.pomo", "--flush-interval", "0.5"]) == 0
    (tmp_path / "spark.conf").write_text("spark.executor.memory 2g\n")
    assert main(
        ["serve", "--data", str(tmp_path), "--full-state", "--binary-joins", "--hit-replica",
         "--whole-source-rows", "12",
         "--memory-budget", "64MiB", "--subscription-buffer", "50", "--spark-timeout", "20",
         "--max-lookup-keys", "7", "--spark-conf", "spark.cores.max=1", "--spark-nice", "3"]
    ) == 0
    settings = ("spark_timeout", "spark_write_timeout", *(limit.name for limit in LIMITS))
    defaults = dict.fromkeys(settings, "default")
    assert calls == [
        {
            "data_dir": Path("./data"),
            "host": "127.0.0.1",
            "port": 9000,
            "metrics_port": None,
            "program": Path("p.pomo"),
            "spark_master": "spark://h:7077",
            "spark_conf": SparkConf({"spark.cores.max": "2"}, {"spark.cores.max": "env POMOVIEW_SPARK_CONF"}),
            "spark_nice": 10,
            "flush_interval": 0.5,
            "max_apply_lag": 0.1,
            "store": None,
            "full_state": False,
            "binary_joins": False,
            "memory_budget": 3 << 29,
            "spark_timeout": 300.0,
            "spark_write_timeout": 3600.0,
            "security": ServerSecurity(),
            "subscription_buffer": 10_000,
            "limits": Limits(),
            "hit_replica": False,
            "whole_source_rows": 250_000,
            "origins": {"data": "default", "store": "default", "spark_master": "env POMOVIEW_SPARK_MASTER",
                        "metrics_port": "default", "memory_budget": "env POMOVIEW_MEMORY_BUDGET",
                        "spark_nice": "default", **defaults},
        },
        {
            "data_dir": tmp_path,
            "host": "127.0.0.1",
            "port": 7878,
            "metrics_port": None,
            "program": None,
            "spark_master": "spark://h:7077",
            "spark_conf": SparkConf(
                {"spark.executor.memory": "2g", "spark.cores.max": "1"},
                {"spark.executor.memory": f"{tmp_path / 'spark.conf'}:1", "spark.cores.max": "flag"},
            ),
            "spark_nice": 3,
            "flush_interval": 5.0,
            "max_apply_lag": 0.1,
            "store": None,
            "full_state": True,
            "binary_joins": True,
            "memory_budget": 64 << 20,
            "spark_timeout": 20.0,
            "spark_write_timeout": 3600.0,
            "security": ServerSecurity(),
            "subscription_buffer": 50,
            "limits": dataclasses.replace(Limits(), max_lookup_keys=7),
            "hit_replica": True,
            "whole_source_rows": 12,
            "origins": {"data": "flag", "store": "default", "spark_master": "env POMOVIEW_SPARK_MASTER",
                        "metrics_port": "default", "memory_budget": "flag",
                        **defaults, "spark_timeout": "flag", "max_lookup_keys": "flag", "spark_nice": "flag"},
        },
    ]


def test_lookups_fall_back_to_rows_for_a_server_without_columns(address: str, fake: FakeViewService) -> None:
    """A server that predates columnar answers ignores `columnar` and `key_columns`: its
    answer has no columns, so the client asks again in rows, and in rows from then on."""
    fake.columnar = False
    try:
        with Client(address) as db:
            assert db.lookup("articleWithVotes", {"id": 1}) == [
                {"id": 1, "title": "b", "votes": 2},
                {"id": 1, "title": "a", "votes": 1},
            ]
            many = db.lookup_many("articleWithVotes", [{"id": 2}, {"id": 3}])
            assert [[r["id"] for r in rows] for rows in many.values()] == [[2, 2], [3, 3]]
    finally:
        fake.columnar = True
    first, again, many_request = fake.requests
    assert first.columnar and first.HasField("key_columns")
    assert not again.columnar and request_keys(again) == [{"id": 1}] and not again.HasField("key_columns")
    assert not many_request.columnar and request_keys(many_request) == [{"id": 2}, {"id": 3}]


def test_async_lookups_fall_back_to_rows_too(address: str, fake: FakeViewService) -> None:
    async def scenario() -> None:
        async with AsyncClient(address) as db:
            assert len(await db.lookup("articleWithVotes", {"id": 4})) == 2
            assert len(await db.lookup("articleWithVotes", {"id": 4})) == 2

    fake.columnar = False
    try:
        asyncio.run(scenario())
    finally:
        fake.columnar = True
    assert [r.columnar for r in fake.requests] == [True, False, False]
