"""Deadlines for the Spark jobs the server starts (`--spark-timeout`, `--spark-write-timeout`).

A Spark job that hangs (a stalled read, a task stuck on a dead disk or executor) would hold
its caller forever: a lookup and every lookup coalesced with it, or the flusher. Each Spark
action of the server runs inside `deadline(...)`, which tags the jobs the calling thread
starts (`SparkContext.addJobTag`, a thread-local property that the threads Spark starts for
the action, such as `toArrow`'s serving thread, inherit) and asks for interruption on cancel.
Past the deadline, one watchdog thread cancels the tagged jobs through Spark's own API
(`cancelJobsWithTag`), again every `_RECANCEL` seconds until the action returns: a cancel
only reaches jobs already submitted, and an action still being planned at the deadline, or
one that starts its next job, would otherwise escape it. The action then raises, and the
caller gets `SparkTimeout` (DEADLINE_EXCEEDED) naming the limit and its flag.

Tags, not job groups: a bulk load's jobs already belong to its own job group (its progress
and its cancellation use it), and a job can carry several tags but only one group.

Two limits: reads (keyed upquery fetches: a client waits on them) and writes (flushes,
compactions, bulk loads: their time grows with the data and nobody waits on a flush, so a
limit as short as a read's would cancel legitimate work forever; theirs is a backstop).

For tests only, `POMOVIEW_TEST_STALL_SPARK=<folder>` stalls the server's Spark jobs from
inside Spark: while `<folder>/<kind>` exists (kind: fetch, flush, compact, load), each job of
that kind plans a per-row sleep of as many seconds as the file says (default 600), a task
that Spark itself must interrupt.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pomoview.server.errors import DeadlineExceeded

log = logging.getLogger("pomoview.spark")

DEFAULT_READ_TIMEOUT = 300.0
DEFAULT_WRITE_TIMEOUT = 3600.0
READ_SETTING = "--spark-timeout, env POMOVIEW_SPARK_TIMEOUT"
WRITE_SETTING = "--spark-write-timeout, env POMOVIEW_SPARK_WRITE_TIMEOUT"
STALL_ENV = "POMOVIEW_TEST_STALL_SPARK"
# Seconds between cancels once a deadline has passed (see the module's docstring).
_RECANCEL = 0.25


@dataclass
class SparkTimeouts:
    """The limits in seconds (None: no limit) of reading and of writing Spark jobs; shared by
    reference, so a change applies to the jobs that start after it."""

    read: float | None = DEFAULT_READ_TIMEOUT
    write: float | None = DEFAULT_WRITE_TIMEOUT


class SparkTimeout(DeadlineExceeded):
    """A Spark action ran past its deadline; its jobs were cancelled."""

    def __init__(self, what: str, seconds: float, setting: str) -> None:
        super().__init__(
            f"{what} did not finish within the Spark timeout of {seconds:g} s ({setting}); "
            "its Spark jobs were cancelled"
        )
        self.seconds = seconds


class _Watch:
    def __init__(self, tag: str, due: float, spark: SparkSession) -> None:
        self.tag = tag
        self.due = due
        self.spark = spark
        self.expired = False
        self.closed = False


class _Watchdog:
    """One thread for every deadline of the process; it runs only while a deadline is open."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._open = 0

    def watch(self, tag: str, seconds: float, spark: SparkSession) -> _Watch:
        watch = _Watch(tag, time.monotonic() + seconds, spark)
        with self._cond:
            self._open += 1
            heapq.heappush(self._heap, (watch.due, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="spark-deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()
        return watch

    def close(self, watch: _Watch) -> None:
        with self._cond:
            watch.closed = True
            self._open -= 1
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].closed:
                    heapq.heappop(self._heap)
                if not self._heap:
                    assert self._open == 0
                    self._thread = None  # a new deadline starts a new thread
                    return
                due, _, watch = self._heap[0]
                now = time.monotonic()
                if due > now:
                    self._cond.wait(due - now)
                    continue
                heapq.heapreplace(self._heap, (now + _RECANCEL, next(self._order), watch))
                first = not watch.expired
                watch.expired = True
            if first:
                log.warning("Spark jobs %s ran past their deadline: cancelling them", watch.tag)
            try:
                watch.spark.sparkContext.cancelJobsWithTag(watch.tag)
            except Exception:  # noqa: BLE001 (a dead session: its caller fails on its own)
                log.debug("cancelling the Spark jobs %s failed", watch.tag, exc_info=True)

    def running(self) -> bool:
        with self._cond:
            return self._thread is not None


_WATCHDOG = _Watchdog()


def watchdog_running() -> bool:
    """Whether the watchdog thread is alive (it is not once every deadline has closed)."""
    return _WATCHDOG.running()


@contextlib.contextmanager
def deadline(spark: SparkSession, seconds: float | None, what: str, setting: str) -> Iterator[None]:
    """Runs the body's Spark jobs (started on this thread) under a deadline of `seconds`
    (None: none). Past it they are cancelled, and whatever the body then raises becomes
    `SparkTimeout`, naming `what` and the `setting` that sets the limit. A body that
    finishes anyway, as a cancel comes too late, keeps its result."""
    if seconds is None:
        yield
        return
    context = spark.sparkContext
    tag = f"pomoview-deadline-{uuid.uuid4().hex}"
    context.addJobTag(tag)
    # Interrupt the tasks' threads, so that a task blocked in I/O or a sleep stops too.
    context.setInterruptOnCancel(True)
    watch = _WATCHDOG.watch(tag, seconds, spark)
    try:
        yield
    except Exception as err:
        if watch.expired:
            raise SparkTimeout(what, seconds, setting) from err
        raise
    finally:
        _WATCHDOG.close(watch)
        try:
            context.removeJobTag(tag)
        except Exception:  # noqa: BLE001 (a dead session has no tags left to remove)
            log.debug("removing the job tag %s failed", tag, exc_info=True)


def stall_for_tests(df: DataFrame, kind: str) -> DataFrame:
    """`df`, made to stall in Spark when a test asks for it (see the module's docstring)."""
    folder = os.environ.get(STALL_ENV)
    if not folder:
        return df
    try:
        text = (Path(folder) / kind).read_text().strip()
    except FileNotFoundError:
        return df
    millis = int(float(text or "600") * 1000)
    # A JVM sleep per row, through reflection: interruptible, and needs no Python worker.
    sleep = F.expr(f"reflect('java.lang.Thread', 'sleep', cast({millis} as bigint))")
    return df.where(F.length(F.coalesce(sleep, F.lit(""))) >= 0)
