"""Spark jobs that hang, in the scheduler (shared Spark session): a stalled upquery fails every
lookup coalesced on it with DEADLINE_EXCEEDED and fills nothing; a stalled flush leaves the
store at its version and the log untrimmed; once Spark answers again, both work."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.errors import DeadlineExceeded
from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.spark.deadline import STALL_ENV, SparkTimeouts, watchdog_running

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: Id, title: T, votes: N) :- article(id: Id, title: T), N := count : vote(article_id: Id).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def settle(spark: Any, timeout: float = 60) -> None:
    tracker = spark.sparkContext.statusTracker()
    end = time.monotonic() + timeout
    while tracker.getActiveJobsIds() or watchdog_running():
        assert time.monotonic() < end, f"still active: {tracker.getActiveJobsIds()}"
        time.sleep(0.1)


def test_stalled_upqueries_and_flushes_time_out_and_change_nothing(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stall = tmp_path / "stall"
    stall.mkdir()
    monkeypatch.setenv(STALL_ENV, str(stall))
    # Short deadlines only while Spark is stalled: a job on this loaded machine may take seconds.
    timeouts = SparkTimeouts()
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600, spark_timeouts=timeouts)
    s.start()
    try:
        s.install(VOTES)
        s.write([("article", [row(id=i, title=f"t{i}") for i in range(4)], [])])
        epoch = s.write([("vote", [row(article_id=i, user_id=u) for i in range(4) for u in range(i)], [])])
        s.lookup("articleWithVotes", [row(id=0)], min_epoch=epoch)
        assert s.flush() == epoch  # cold keys now need keyed Spark jobs
        present = sum(r.present_keys for r in s.stats().readers)

        (stall / "fetch").write_text("600")
        timeouts.read = 2.0
        jobs = s.stats().spark_jobs
        errors: list[BaseException] = []

        def look() -> None:
            try:
                s.lookup("articleWithVotes", [row(id=3)])
            except BaseException as err:
                errors.append(err)

        lookups = [threading.Thread(target=look) for _ in range(3)]
        for t in lookups:
            t.start()
        for t in lookups:
            t.join(300)
        assert len(errors) == 3 and all(isinstance(e, DeadlineExceeded) for e in errors), errors
        message = errors[0].message  # type: ignore[attr-defined]
        assert "the upquery on source 'article'" in message or "'vote'" in message, message
        assert "Spark timeout of 2 s (--spark-timeout, env POMOVIEW_SPARK_TIMEOUT)" in message, message
        # Coalesced: one job per source for the three lookups (not three each).
        assert s.stats().spark_jobs - jobs <= 2
        assert sum(r.present_keys for r in s.stats().readers) == present  # nothing filled
        settle(spark)
        assert not s.upquery_pins.versions and s.store._snapshots.pin_count() == 0  # every pin released

        (stall / "fetch").unlink()
        timeouts.read = 300.0
        assert s.lookup("articleWithVotes", [row(id=3)])[0] == [[{"id": 3, "title": "t3", "votes": 3}]]

        # A flush that hangs: the store stays at its version, the log keeps the batch.
        (stall / "flush").write_text("600")
        timeouts.write = 2.0
        later = s.write([("vote", [row(article_id=3, user_id=9)], [])])
        s.lookup("articleWithVotes", [row(id=3)], min_epoch=later)
        with pytest.raises(DeadlineExceeded, match=r"flush of epochs .*\(--spark-write-timeout"):
            s.flush()
        assert s.store.version == epoch
        assert [b.epoch for b in s.tail.batches] == [later]
        assert any(p.stat().st_size for p in s.wal.segment_paths())
        assert not list((tmp_path / "data" / "store" / "vote").glob(".tmp-*"))  # deleted at once
        settle(spark)
        (stall / "flush").unlink()
        timeouts.write = 300.0
        assert s.flush() == later and s.tail.batches == []
        assert s.lookup("articleWithVotes", [row(id=2), row(id=3)])[0] == [
            [{"id": 2, "title": "t2", "votes": 2}],
            [{"id": 3, "title": "t3", "votes": 4}],
        ]
    finally:
        s.stop()
