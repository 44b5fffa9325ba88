"""A keyed Spark job that fails: the lookup gets Unavailable naming the source and the reason,
nothing is filled, and the next lookup runs the job again (in-process, shared Spark session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pomoview.server.errors import Unavailable
from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.spark.session import SparkSessionLost

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: Id, title: T, votes: N) :- article(id: Id, title: T), N := count : vote(article_id: Id).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


class FlakySpark:
    """A provider over the shared session that raises `error` from the `fail_from`-th call on;
    `dead` is what its `check()` reports, as SparkProvider does for a dead JVM."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.calls = 0
        self.fail_from: int | None = None
        self.error: Exception = RuntimeError("boom")
        self.dead: str | None = None
        self.checks = 0

    def __call__(self) -> Any:
        self.calls += 1
        if self.fail_from is not None and self.calls >= self.fail_from:
            raise self.error
        return self.spark

    def check(self) -> str | None:
        self.checks += 1
        return self.dead


def present_keys(s: Scheduler) -> int:
    return sum(r.present_keys for r in s.stats().readers)


def test_failed_jobs_fill_nothing_and_the_next_lookup_retries(tmp_path: Path, spark: Any) -> None:
    provider = FlakySpark(spark)
    s = Scheduler(tmp_path / "data", provider, flush_interval=3600)
    s.start()
    try:
        s.install(VOTES)
        s.write([("article", [row(id=i, title=f"t{i}") for i in range(3)], [])])
        epoch = s.write([("vote", [row(article_id=1, user_id=u) for u in range(4)], [])])
        s.lookup("articleWithVotes", [row(id=0)], min_epoch=epoch)  # waits until applied
        assert s.flush() == epoch  # now the keyed jobs read Parquet
        before = present_keys(s)

        # The first job of the lookup (one source) succeeds, the second fails.
        provider.fail_from = provider.calls + 2
        with pytest.raises(Unavailable) as failed:
            s.lookup("articleWithVotes", [row(id=1)])
        message = failed.value.message
        assert "'vote'" in message or "'article'" in message, message
        assert "failed in Spark" in message and "RuntimeError: boom" in message, message
        assert present_keys(s) == before  # the reader did not get key 1
        jobs = s.stats().spark_jobs

        # A write to the missing key meanwhile is dropped at the state and kept in the log.
        epoch = s.write([("vote", [row(article_id=1, user_id=9)], [])])
        with pytest.raises(Unavailable):  # still failing: the next lookup runs the job again
            s.lookup("articleWithVotes", [row(id=1)], min_epoch=epoch)
        assert s.stats().spark_jobs > jobs

        # The session died with the job: the reason says so.
        provider.error, provider.dead = RuntimeError("Connection refused"), "the JVM exited"
        with pytest.raises(Unavailable) as failed:
            s.lookup("articleWithVotes", [row(id=1)])
        assert "Spark session died (the JVM exited)" in failed.value.message
        provider.error = SparkSessionLost("the Spark driver JVM exited with status -9")
        with pytest.raises(Unavailable) as failed:
            s.lookup("articleWithVotes", [row(id=1)])
        assert "exited with status -9" in failed.value.message
        assert "a new one is starting" in failed.value.message

        provider.fail_from = None
        rows, _ = s.lookup("articleWithVotes", [row(id=1)])
        assert rows == [[{"id": 1, "title": "t1", "votes": 5}]]
        assert present_keys(s) > before
    finally:
        s.stop()
