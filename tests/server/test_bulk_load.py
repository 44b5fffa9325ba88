"""Bulk load: reading and checking files (`bulk_load.LoadJob.prepare`) on the shared Spark
session, and `Scheduler.load` committing them as one epoch, over real files."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pomoview.server.errors import FailedPrecondition, InvalidArgument, NotFound, ServiceError, Unimplemented
from pomoview.server.load.bulk_load import BadInput, LoadJob, Progress, resolve_format
from pomoview.server.scheduler.scheduler import Scheduler

VOTE = (("article_id", "int"), ("user_id", "int"))
MIXED = (("i", "int"), ("f", "float"), ("s", "string"), ("b", "bool"))
VOTES_PROGRAM = (Path(__file__).resolve().parents[2] / "examples" / "votes.pomo").read_text()


def prepare(spark: Any, path: Path | str, schema: Any = VOTE, fmt: str = "", **options: str) -> list[tuple]:
    """The rows a load of `path` would write, sorted; raises what the load raises. The load's
    one pass (`plan`, `run`; a bad row: `refusal`), and the slow pass that numbers the rows
    (`prepare`), which must agree with it."""
    with LoadJob(spark) as job:
        plan = job.plan(str(path), fmt, options, "src", schema)
        try:
            rows, count = job.run(plan, lambda df: sorted(tuple(r) for r in df.collect()), lambda _: None)
        except BadInput:
            raise job.refusal(plan) from None
        assert count == job.rows == len(rows)
        prepared = job.prepare(str(path), fmt, options, "src", schema)
        assert sorted(tuple(r) for r in prepared.rows.collect()) == rows
        assert prepared.count == count
        return rows


def refused(spark: Any, path: Path | str, schema: Any = VOTE, fmt: str = "", **options: str) -> str:
    with pytest.raises(ServiceError) as err:
        prepare(spark, path, schema, fmt, **options)
    assert isinstance(err.value, InvalidArgument), err.value.message
    return err.value.message


@pytest.fixture
def small_splits(spark: Any) -> Iterator[None]:
    """Makes Spark cut every file into many small blocks, spread over several partitions."""
    conf = spark.conf
    saved = {k: conf.get(k) for k in ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")}
    conf.set("spark.sql.files.maxPartitionBytes", "512")
    conf.set("spark.sql.files.openCostInBytes", "0")
    yield
    for k, v in saved.items():
        conf.set(k, v)


# -- CSV -----------------------------------------------------------------------------------


def test_csv_rows_are_typed_and_duplicates_kept(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    # Columns in any order; a blank line is skipped.
    path.write_text("user_id,article_id\n7,1\n\n8,1\n7,1\n-3,+2\n")
    assert prepare(spark, path) == [(1, 7), (1, 7), (1, 8), (2, -3)]


def test_csv_values_of_every_type(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text('i,f,s,b\n1,1.5,"a,b",true\n-2,3,,FALSE\n3,1e3,"",True\n4,-inf,"x ""y""",false\n')
    rows = prepare(spark, path, MIXED)
    assert rows == [
        (-2, 3.0, "", False),
        (1, 1.5, "a,b", True),
        (3, 1000.0, "", True),
        (4, float("-inf"), 'x "y"', False),
    ]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("abc,1", "attribute 'article_id': 'abc' is not an int"),
        ("1.5,1", "attribute 'article_id': '1.5' is not an int"),
        (" 1,1", "attribute 'article_id': ' 1' is not an int"),
        (",1", "attribute 'article_id': '' is not an int"),
        (
            "99999999999999999999,1",
            "attribute 'article_id': '99999999999999999999' is outside the 64-bit int range",
        ),
        ("1", "has 1 fields, expected 2"),
        ("1,2,3", "has 3 fields, expected 2"),
    ],
)
def test_csv_first_bad_row_named_with_its_line(spark: Any, tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "v.csv"
    good = [f"{i},{i}" for i in range(60)]
    # The header is line 1 and the blank line counts: the bad row is line 37; a later bad
    # row is not the one reported.
    lines = ["article_id,user_id", *good[:30], "", *good[30:34], line, *good[34:], "x,y"]
    path.write_text("\n".join(lines) + "\n")
    assert lines[36] == line
    assert refused(spark, path) == f"{path}:37: {reason}"


def test_csv_float_and_bool_reasons(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text("i,f,s,b\n1,1.5d,s,true\n")
    assert refused(spark, path, MIXED) == f"{path}:2: attribute 'f': '1.5d' is not a float"
    path.write_text("i,f,s,b\n1,1.5,s,yes\n")
    assert refused(spark, path, MIXED) == f"{path}:2: attribute 'b': 'yes' is not a bool"


def test_row_numbers_hold_across_many_blocks_and_partitions(
    spark: Any, tmp_path: Path, small_splits: None
) -> None:
    path = tmp_path / "v.csv"
    lines = ["article_id,user_id"] + [f"{i % 7},{i}" for i in range(3000)]
    lines[2345] = "7,oops"  # line 2346
    lines[100] = ""
    path.write_text("\n".join(lines) + "\n")
    assert os.path.getsize(path) > 30 * 512  # dozens of blocks
    assert spark.read.text(str(path)).rdd.getNumPartitions() > 1
    assert refused(spark, path) == f"{path}:2346: attribute 'user_id': 'oops' is not an int"
    lines[2345] = f"{2344 % 7},2344"
    # A new file rather than the same one rewritten: the fixed line has the same length, so a
    # rewrite within the clock's granularity keeps size and mtime, the identity Hadoop's file
    # listing goes by (this test once failed when it rewrote the file in place).
    path = tmp_path / "v-fixed.csv"
    path.write_text("\n".join(lines) + "\n")
    rows = prepare(spark, path)
    assert len(rows) == 2999
    assert rows == sorted((i % 7, i) for i in range(3000) if i != 99)


def test_csv_header_must_name_the_attributes(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("article_id,voter\n1,2\n")
    message = refused(spark, path)
    assert message.startswith(f"{path}:1: missing column 'user_id'; unknown column 'voter'")
    path.write_text("article_id,user_id,user_id\n1,2,3\n")
    assert refused(spark, path) == f"{path}:1: column 'user_id' appears twice in the header"


def test_csv_without_header_and_other_delimiter(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.txt"
    path.write_text("1;2\n3;4\n")
    assert prepare(spark, path, fmt="csv", header="false", delimiter=";") == [(1, 2), (3, 4)]
    # Without a header the first line is data: line 1 is the bad one.
    path.write_text("x;2\n3;4\n")
    assert refused(spark, path, fmt="csv", header="false", sep=";") == (
        f"{path}:1: attribute 'article_id': 'x' is not an int"
    )


def test_csv_refuses_bytes_and_unknown_options(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("k,v\n1,2\n")
    assert "CSV cannot hold" in refused(spark, path, (("k", "int"), ("v", "bytes")))
    assert "unknown CSV option 'inferSchema'" in refused(spark, path, inferSchema="true")


# -- JSON lines ----------------------------------------------------------------------------


def test_jsonl_values_keep_their_json_types(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    rows = [
        {"i": 1, "f": 2, "s": "x", "b": True},
        {"b": False, "s": "", "f": 0.25, "i": -9223372036854775808},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert prepare(spark, path, MIXED) == [
        (-9223372036854775808, 0.25, "", False),
        (1, 2.0, "x", True),
    ]


def test_jsonl_bytes_are_tagged_base64(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text('{"k": 1, "v": {"$bytes": "aGk="}}\n')
    assert prepare(spark, path, (("k", "int"), ("v", "bytes"))) == [(1, b"hi")]
    path.write_text('{"k": 1, "v": "aGk="}\n')
    assert refused(spark, path, (("k", "int"), ("v", "bytes"))) == (
        f'{path}:1: attribute \'v\': "aGk=" is not bytes ({{"$bytes": "<base64>"}})'
    )


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"article_id": "1", "user_id": 2}', 'attribute \'article_id\': "1" is not an int'),
        ('{"article_id": 1.0, "user_id": 2}', "attribute 'article_id': 1.0 is not an int"),
        ('{"article_id": null, "user_id": 2}', "attribute 'article_id': null is not an int"),
        ('{"article_id": 1}', "missing attribute 'user_id'"),
        (
            '{"article_id": 1, "user_id": 2, "x": 3}',
            "unknown attribute 'x' (source 'src' has article_id, user_id)",
        ),
        ("[1, 2]", "not a JSON object"),
        ('{"article_id": 1, "user_id": 2', "not valid JSON (or a key appears twice)"),
    ],
)
def test_jsonl_first_bad_line(spark: Any, tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "v.jsonl"
    lines = [json.dumps({"article_id": i, "user_id": i}) for i in range(50)]
    lines[36] = line
    path.write_text("\n".join(lines) + "\n")
    assert refused(spark, path) == f"{path}:37: {reason}"


# -- Parquet -------------------------------------------------------------------------------


def test_parquet_widens_integers_and_numbers_rows_per_file(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "v.parquet"
    df = spark.createDataFrame([(i % 3, i) for i in range(40)], "article_id int, user_id bigint")
    df.coalesce(1).write.parquet(str(folder))
    assert prepare(spark, folder) == sorted((i % 3, i) for i in range(40))
    # A null: named by the file that holds it and its row in that file.
    nulls = tmp_path / "n.parquet"
    rows = [(i, i) for i in range(40)]
    rows[36] = (None, 36)  # type: ignore[call-overload]
    spark.createDataFrame(rows, "article_id bigint, user_id bigint").coalesce(1).write.parquet(str(nulls))
    (file,) = [p for p in nulls.iterdir() if p.name.endswith(".parquet")]
    assert refused(spark, nulls) == f"{file}:37: attribute 'article_id' is null"


def test_parquet_columns_must_match(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "v.parquet"
    spark.createDataFrame([("1", 2)], "article_id string, user_id bigint").write.parquet(str(folder))
    assert refused(spark, folder) == (
        f"{folder}: column 'article_id' holds string, but the attribute is int"
    )
    other = tmp_path / "w.parquet"
    spark.createDataFrame([(1, 2)], "article_id bigint, voter bigint").write.parquet(str(other))
    assert "missing column 'user_id'; unknown column 'voter'" in refused(spark, other)


# -- paths, formats, changes -------------------------------------------------------------


def test_paths_and_formats(spark: Any, tmp_path: Path) -> None:
    assert resolve_format("/x/a.CSV", "") == "csv"
    assert resolve_format("/x/a.jsonl.gz", "") == "jsonl"
    assert resolve_format("file:///x/a.parquet", "") == "parquet"
    with pytest.raises(InvalidArgument, match="cannot tell the format"):
        resolve_format("/x/a.dat", "")
    with pytest.raises(InvalidArgument, match="unknown format 'xml'"):
        resolve_format("/x/a.csv", "xml")
    assert "no such file" in refused(spark, tmp_path / "missing.csv")
    assert "must be absolute" in refused(spark, "relative.csv")
    not_parquet = tmp_path / "v.parquet"
    not_parquet.write_text("article_id,user_id\n1,2\n")
    assert refused(spark, not_parquet).startswith(f"{not_parquet}: cannot be read: ")
    # A scheme no file system of Spark's serves is the caller's, not an outage (the fuzz
    # test found it answered UNAVAILABLE).
    assert refused(spark, "nosuchfs://x/y.csv").startswith("nosuchfs://x/y.csv: cannot be read: ")


def test_a_file_changed_after_validation_is_refused_when_written(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n1,2\n3,4\n")
    with LoadJob(spark) as job:
        prepared = job.prepare(str(path), "", {}, "src", VOTE)
        validated = path.stat()
        path.write_text("article_id,user_id\n1,2\n3,x\n5,6\n")
        # Another size, and a modification time surely apart (not a sleep's worth of clock).
        os.utime(path, ns=(validated.st_atime_ns, validated.st_mtime_ns + 2_000_000_000))
        with pytest.raises(FailedPrecondition, match="changed while it was being loaded"):
            with job.failures(str(path)):
                prepared.rows.collect()


def test_progress_covers_every_phase(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n" + "".join(f"{i},{i}\n" for i in range(500)))
    reports: list[Progress] = []
    with LoadJob(spark, reports.append, interval=0.01) as job:
        prepared = job.prepare(str(path), "", {}, "src", VOTE)
        with job.phase("writing", job.write_from, 1.0):
            prepared.rows.collect()
    phases = list(dict.fromkeys(r.phase for r in reports))
    assert phases[-3:] == ["counting", "validating", "writing"]
    fractions = [r.fraction for r in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert reports[-1].rows == 500
    assert any(r.tasks_total > 0 for r in reports)


# -- Scheduler.load ------------------------------------------------------------------------


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def votes_of(s: Scheduler, article: int) -> list[dict[str, Any]]:
    """The view's rows for one article, reflecting every committed epoch."""
    return s.lookup("articleWithVotes", [row(id=article)], min_epoch=s.stats().durable_epoch)[0][0]


@pytest.fixture
def scheduler(tmp_path: Path, spark: Any) -> Iterator[Scheduler]:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    s.install(VOTES_PROGRAM)
    yield s
    s.stop()


def test_load_commits_one_epoch_after_the_logged_writes(
    scheduler: Scheduler, tmp_path: Path, spark: Any
) -> None:
    s = scheduler
    s.write([("article", [row(id=1, title="a"), row(id=2, title="b")], [])])
    e2 = s.write([("vote", [row(article_id=1, user_id=1), row(article_id=2, user_id=9)], [])])
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 1}]  # a reader with state
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n" + "".join(f"1,{u}\n" for u in range(1, 11)) + "1,5\n")
    assert s.load("vote", str(path)) == (11, e2 + 1)
    stats = s.stats()
    assert stats.durable_epoch == stats.applied_epoch == stats.flushed_epoch == e2 + 1
    # The earlier writes were flushed below the load, nothing was lost or counted twice.
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 10}]
    assert votes_of(s, 2) == [{"id": 2, "title": "b", "votes": 1}]
    # Writes after the load follow it, and a delete of a loaded tuple wins (a later epoch).
    e4 = s.write([("vote", [], [row(article_id=1, user_id=3)])])
    assert e4 == e2 + 2
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 9}]
    s.flush()
    s.stop()
    again = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    again.start()
    try:
        assert again.stats().durable_epoch == e4
        assert votes_of(again, 1) == [{"id": 1, "title": "a", "votes": 9}]
        assert again.write([("vote", [row(article_id=2, user_id=1)], [])]) == e4 + 1
    finally:
        again.stop()


def test_restart_right_after_a_load_keeps_it_and_its_epoch(tmp_path: Path, spark: Any) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    s.install(VOTES_PROGRAM)
    s.write([("article", [row(id=1, title="a")], [])])
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps({"article_id": 1, "user_id": u}) + "\n" for u in range(5)))
    assert s.load("vote", str(path)) == (5, 2)
    # No stop and no flush: the process could die right here.
    again = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    again.start()
    try:
        assert again.stats().durable_epoch == 2
        assert votes_of(again, 1) == [{"id": 1, "title": "a", "votes": 5}]
        assert again.write([("vote", [row(article_id=1, user_id=99)], [])]) == 3
    finally:
        again.stop()
        s.wal.close()


def test_refused_load_changes_nothing(scheduler: Scheduler, tmp_path: Path) -> None:
    s = scheduler
    s.write([("article", [row(id=1, title="a")], [])])
    epoch = s.write([("vote", [row(article_id=1, user_id=1)], [])])
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n1,2\n1,x\n")
    with pytest.raises(InvalidArgument, match=r"v\.csv:3: attribute 'user_id': 'x' is not an int"):
        s.load("vote", str(path))
    with pytest.raises(NotFound, match="no source named 'nosuch'"):
        s.load("nosuch", str(path))
    with pytest.raises(NotFound):
        s.load("articleWithVotes", str(path))
    stats = s.stats()
    assert stats.durable_epoch == stats.applied_epoch == epoch
    assert stats.flushed_epoch == 0
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 1}]
    assert s.write([("vote", [row(article_id=1, user_id=2)], [])]) == epoch + 1


def test_a_file_without_rows_commits_no_epoch(scheduler: Scheduler, tmp_path: Path) -> None:
    epoch = scheduler.write([("article", [row(id=1, title="a")], [])])
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n\n")
    assert scheduler.load("vote", str(path)) == (0, epoch)
    assert scheduler.stats().durable_epoch == epoch


def _load_fails_in(s: Scheduler, method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Writes article 1, then loads one vote for it while the store's `method` raises: the load
    gets UNAVAILABLE. Returns the file, for a load after it."""
    s.write([("article", [row(id=1, title="a")], [])])
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n1,2\n")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(s.store, method, broken)
    with pytest.raises(ServiceError, match="disk on fire") as err:
        s.load("vote", str(path))
    assert err.value.code == "UNAVAILABLE"
    monkeypatch.undo()
    return path


def test_failed_store_write_publishes_nothing(
    scheduler: Scheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = scheduler
    path = _load_fails_in(s, "publish_load", tmp_path, monkeypatch)
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 0}]
    # The marker's epoch stays used; the next load and write go on after it.
    assert s.load("vote", str(path)) == (1, 3)
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 1}]


class WatchedLock:
    """The scheduler's write lock, wrapped: `blocked` is set when the thread named `waiter`
    finds the lock held and waits for it (and `on_block` is called)."""

    def __init__(self, lock: Any, waiter: str, on_block: Any) -> None:
        self._lock = lock
        self._waiter = waiter
        self._on_block = on_block
        self.blocked = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        if threading.current_thread().name == self._waiter:
            self.blocked.set()
            self._on_block()
        return bool(self._lock.acquire(True, timeout))

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return bool(self._lock.locked())

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_writes_wait_for_a_load_in_progress(scheduler: Scheduler, tmp_path: Path) -> None:
    s = scheduler
    s.write([("article", [row(id=1, title="a")], [])])
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n" + "".join(f"1,{u}\n" for u in range(100)))
    in_write_phase = threading.Event()
    release = threading.Event()
    real_load = s.store.stage_load

    def slow_load(*args: Any, **kwargs: Any) -> Any:
        in_write_phase.set()
        release.wait(30)
        return real_load(*args, **kwargs)

    s.store.stage_load = slow_load  # type: ignore[method-assign]
    # The writer either blocks on the write lock (held by the load, in its write phase) or,
    # were the load not holding it, commits: `moved` is set by whichever happens first.
    moved = threading.Event()
    watched = WatchedLock(s.writes.lock, "writer", moved.set)
    s.writes.lock = watched  # type: ignore[assignment]
    result: list[Any] = []
    loader = threading.Thread(target=lambda: result.append(s.load("vote", str(path))))
    loader.start()
    assert in_write_phase.wait(120)
    epochs: list[int] = []

    def write() -> None:
        epochs.append(s.write([("vote", [row(article_id=1, user_id=500)], [])]))
        moved.set()

    writer = threading.Thread(target=write, name="writer")
    writer.start()
    assert moved.wait(120), "the write neither committed nor waited for the write lock"
    # The write waits for the load's epoch to be committed: it is blocked on the lock the
    # load holds, and has no epoch.
    assert watched.blocked.is_set() and not epochs, epochs
    # Lookups go on meanwhile, at the epoch before the load.
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 0}]
    release.set()
    loader.join(60)
    writer.join(60)
    assert result == [(100, 2)] and epochs == [3]
    assert s.lookup("articleWithVotes", [row(id=1)], min_epoch=3)[0][0] == [
        {"id": 1, "title": "a", "votes": 101}
    ]


def test_a_source_with_a_cid_attribute_is_refused_before_spark(tmp_path: Path) -> None:
    def no_spark() -> Any:
        raise AssertionError("the refusal needs no Spark")

    s = Scheduler(tmp_path / "data", no_spark, flush_interval=3600)
    s.install("source block(size: int, id: cid).\nview b(id).\nb(id: I, size: S) :- block(id: I, size: S).\n")
    path = tmp_path / "blocks.csv"
    path.write_text("size,id\n1,bafkreid7ly5k53yx5chuep3izigln2oixxd7esn67bwobmzc5pw5r2wpqm\n")
    with pytest.raises(Unimplemented, match="'block' has the cid attribute 'id'"):
        s.load("block", str(path))
    s.stop()


# -- the one pass ----------------------------------------------------------------------------


def test_the_first_bad_row_is_named_whichever_the_pass_met(
    spark: Any, tmp_path: Path, small_splits: None
) -> None:
    # Many blocks over parallel tasks: the one pass fails at whichever bad row a task meets
    # first, the refusal still names the file's first.
    path = tmp_path / "v.csv"
    lines = ["article_id,user_id"] + [f"{i % 7},{i}" for i in range(3000)]
    lines[2900] = "x,1"
    lines[2500] = "2,y"
    lines[700] = "3"
    path.write_text("\n".join(lines) + "\n")
    assert refused(spark, path) == f"{path}:701: has 1 fields, expected 2"


def test_a_header_line_repeated_in_the_first_block_is_data(spark: Any, tmp_path: Path) -> None:
    # The one pass takes a first-block line with the header's text for the header; a second
    # such line makes the load number its lines instead.
    strings = (("a", "string"), ("b", "string"))
    path = tmp_path / "s.csv"
    path.write_text("a,b\nx,y\na,b\nz,w\n")
    assert prepare(spark, path, strings) == [("a", "b"), ("x", "y"), ("z", "w")]
    votes = tmp_path / "v.csv"
    votes.write_text("article_id,user_id\n1,2\n3,4\n5,6\narticle_id,user_id\n7,8\n")
    assert refused(spark, votes) == f"{votes}:5: attribute 'article_id': 'article_id' is not an int"


def test_headers_of_a_folder_of_files_and_a_compressed_file(spark: Any, tmp_path: Path) -> None:
    import gzip

    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("article_id,user_id\n1,2\n")
    (folder / "b.csv").write_text("\ufeffuser_id,article_id\r\n4,3\r\n")
    with pytest.raises(InvalidArgument, match="differs from the other files'"):
        prepare(spark, folder, fmt="csv")
    (folder / "b.csv").write_text("\ufeffarticle_id,user_id\r\n3,4\r\n")
    with gzip.open(folder / "c.csv.gz", "wt") as f:
        f.write("article_id,user_id\n5,6\n")
    assert prepare(spark, folder, fmt="csv") == [(1, 2), (3, 4), (5, 6)]


def _stamps_move(path: Path) -> None:
    """Rewrites `path` with other rows of the same size, and a modification time apart."""
    stat = path.stat()
    path.write_text(path.read_text().replace("1,2", "2,1"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def test_a_file_changed_before_the_pass_is_refused(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n1,2\n3,4\n")
    with LoadJob(spark) as job:
        plan = job.plan(str(path), "", {}, "src", VOTE)
        _stamps_move(path)
        with pytest.raises(FailedPrecondition, match="changed while it was being loaded"):
            job.run(plan, lambda df: df.collect(), lambda _: None)


def test_a_file_changed_during_the_pass_is_refused_and_its_part_discarded(
    scheduler: Scheduler, tmp_path: Path
) -> None:
    s = scheduler
    epoch = s.write([("article", [row(id=1, title="a")], [])])
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"article_id": [1, 1, 1], "user_id": [1, 2, 3]}), path)
    real = s.store.stage_load

    def stage_then_change(*args: Any, **kwargs: Any) -> Any:
        staged = real(*args, **kwargs)
        os.utime(path, ns=(0, path.stat().st_mtime_ns + 2_000_000_000))
        return staged

    s.store.stage_load = stage_then_change  # type: ignore[method-assign]
    with pytest.raises(FailedPrecondition, match="changed while it was being loaded"):
        s.load("vote", str(path))
    assert s.stats().durable_epoch == epoch
    assert [p.name for p in (tmp_path / "data" / "store" / "vote").iterdir()] == []
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 0}]


def test_progress_of_the_one_pass(scheduler: Scheduler, tmp_path: Path) -> None:
    s = scheduler
    path = tmp_path / "v.csv"
    path.write_text("article_id,user_id\n" + "".join(f"{i},{i}\n" for i in range(500)))
    reports: list[Progress] = []
    assert s.load("vote", str(path), progress=reports.append) == (500, 1)
    # "reading" until the pass starts, then the one pass: no counting, no validating.
    assert [p for p in dict.fromkeys(r.phase for r in reports) if p != "reading"] == ["writing"]
    fractions = [r.fraction for r in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert reports[-1].rows == 500
    assert any(r.tasks_total > 0 for r in reports)


def _present(s: Scheduler, articles: range) -> dict[int, int]:
    got = {}
    for a in articles:
        (answer,) = votes_of(s, a)
        got[a] = answer["votes"]
    return got


def test_a_load_refused_midway_changes_neither_the_store_nor_the_answers(
    scheduler: Scheduler, tmp_path: Path, spark: Any
) -> None:
    s = scheduler
    s.write([("article", [row(id=a, title=f"t{a}") for a in range(5)], [])])
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"article_id": [i % 5 for i in range(4000)], "user_id": list(range(4000))}), good)
    s.write([("vote", [row(article_id=0, user_id=-1)], [])])
    assert s.load("vote", str(good)) == (4000, 3)
    # The oracle: the view's counts from the files and the writes, by pyarrow and Python.
    table = pq.read_table(good)
    pairs = set(zip(table["article_id"].to_pylist(), table["user_id"].to_pylist(), strict=True)) | {(0, -1)}
    oracle = {a: sum(1 for x, _ in pairs if x == a) for a in range(5)}
    assert _present(s, range(5)) == oracle
    manifest = (tmp_path / "data" / "store" / "manifest.json").read_text()
    folders = sorted(p.name for p in (tmp_path / "data" / "store" / "vote").iterdir())
    # A null late in the second of two files: the pass writes parts of the first meanwhile.
    bad = tmp_path / "bad.parquet"
    bad.mkdir()
    first = pa.table({"article_id": [1] * 3000, "user_id": list(range(10_000, 13_000))})
    pq.write_table(first, bad / "a.parquet")
    users = list(range(20_000, 23_000))
    articles: list[int | None] = [2] * 3000
    articles[2500] = None
    second = pa.table({"article_id": pa.array(articles, pa.int64()), "user_id": users})
    pq.write_table(second, bad / "b.parquet")
    with pytest.raises(InvalidArgument) as err:
        s.load("vote", str(bad))
    assert err.value.message == f"{bad / 'b.parquet'}:2501: attribute 'article_id' is null"
    stats = s.stats()
    assert stats.durable_epoch == stats.applied_epoch == stats.flushed_epoch == 3
    assert (tmp_path / "data" / "store" / "manifest.json").read_text() == manifest
    assert sorted(p.name for p in (tmp_path / "data" / "store" / "vote").iterdir()) == folders
    assert _present(s, range(5)) == oracle
    assert s.write([("vote", [row(article_id=4, user_id=-2)], [])]) == 4


def test_a_failed_pass_uses_no_epoch(
    scheduler: Scheduler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = scheduler
    path = _load_fails_in(s, "stage_load", tmp_path, monkeypatch)
    assert s.load("vote", str(path)) == (1, 2)
    assert votes_of(s, 1) == [{"id": 1, "title": "a", "votes": 1}]


def test_a_staged_load_never_published_is_gone_at_the_next_open(tmp_path: Path, spark: Any) -> None:
    from pomoview.server.store.source_store import SourceStore

    store = SourceStore(str(tmp_path / "store"), lambda: spark)
    store.ensure_source("s", VOTE)
    rows = spark.createDataFrame([(1, 2), (3, 4)], "article_id long, user_id long")
    staged = store.stage_load("s", rows, 1)
    assert staged is not None
    part = tmp_path / "store" / "s" / staged.part.name
    assert any(part.iterdir())  # written, durable, and not listed: invisible
    with store.pinned() as pin:
        assert pin.version == 0
        assert store.fetch("s", ("article_id",), [(1,)], at=pin) == (0, [])
    # As after a crash before the publication: the next open deletes it.
    again = SourceStore(str(tmp_path / "store"), lambda: spark)
    assert again.version == 0
    assert not part.exists()
