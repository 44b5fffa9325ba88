"""Spark deadlines on the shared session: a job that really blocks (a JVM sleep in its tasks)
is cancelled through Spark's job tags, the caller gets SparkTimeout, and nothing is left
running: no active job, no watchdog thread, the session still answers."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pyspark.sql import functions as F

from pomoview.server.errors import DeadlineExceeded
from pomoview.server.spark.deadline import SparkTimeout, deadline, watchdog_running


def blocked(spark: Any) -> Any:
    """Four rows whose every task sleeps 120 s in the JVM (interruptibly)."""
    sleep = F.expr("reflect('java.lang.Thread', 'sleep', cast(120000 as bigint))")
    return spark.range(4).where(F.length(F.coalesce(sleep, F.lit(""))) >= 0)


def settle(spark: Any, timeout: float = 60) -> None:
    """Waits until no Spark job is active and the watchdog thread is gone."""
    tracker = spark.sparkContext.statusTracker()
    end = time.monotonic() + timeout
    while tracker.getActiveJobsIds() or watchdog_running():
        assert time.monotonic() < end, f"still active: {tracker.getActiveJobsIds()}, {watchdog_running()}"
        time.sleep(0.1)


def test_a_blocked_job_is_cancelled_at_its_deadline(spark: Any) -> None:
    job = blocked(spark)
    started = time.monotonic()
    with pytest.raises(SparkTimeout) as timed_out:
        with deadline(spark, 2.0, "the test's job", "--test-flag"):
            job.toArrow()
    took = time.monotonic() - started
    assert isinstance(timed_out.value, DeadlineExceeded)  # DEADLINE_EXCEEDED over gRPC
    message = timed_out.value.message
    assert "the test's job did not finish within the Spark timeout of 2 s (--test-flag)" in message
    assert took < 110, took  # each task sleeps 240 s (2 rows of 120 s); the first job boots Spark
    settle(spark)
    assert not set(spark.sparkContext.getJobTags())
    assert spark.range(3).count() == 3  # the session still runs jobs


def test_a_job_that_starts_after_the_deadline_is_cancelled_too(spark: Any) -> None:
    """A cancel reaches only jobs already running: the watchdog cancels again until the
    action returns, so a job still being planned at the deadline does not escape."""
    job = blocked(spark)
    with pytest.raises(SparkTimeout):
        with deadline(spark, 0.5, "the late job", "--test-flag"):
            time.sleep(1.5)  # planning that outlasts the deadline
            job.collect()
    settle(spark)


def test_a_job_within_its_deadline_keeps_its_result(spark: Any) -> None:
    with deadline(spark, 120.0, "a quick job", "--test-flag"):
        assert spark.range(5).toArrow().num_rows == 5
    with pytest.raises(ZeroDivisionError):  # other errors pass through as they are
        with deadline(spark, 120.0, "a failing body", "--test-flag"):
            _ = 1 / 0
    settle(spark)
    assert not set(spark.sparkContext.getJobTags())
