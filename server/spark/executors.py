"""Whether the server's Spark application has executors to run its jobs on.

Spark does not fail a job that no executor can run: it waits for one, for as long as it
takes (a cluster whose workers all died, or that never had any). A lookup waiting on such a
job would wait for its deadline (`--spark-timeout`, 300 s), and its client for its own.
`ExecutorWatch` polls the driver's status tracker for the application's executors. Once
there has been none for `grace` seconds (`first_grace` after a session starts, which an
executor takes seconds to join), the poll cancels the keyed jobs of lookups (`guard`), those
waiting and those that start meanwhile, and they fail with `NoExecutors` (UNAVAILABLE
naming the cluster). A worker that registers again gives the application a new executor,
and lookups run again from then on. Flushes, compactions and loads are not guarded: they
wait for an executor, up to their own deadline (nobody waits on a flush, and writes go on
into the log meanwhile).

In local mode the driver runs the tasks: there is always an executor once the session is up.

`status()` is what Stats, the metrics (`pomoview_spark_executors`) and the health service
(`pomoview.spark`) report.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyspark.sql import SparkSession

from pomoview.server.errors import Unavailable
from pomoview.server.spark.conf import is_local_master

log = logging.getLogger("pomoview.spark")

# Seconds without an executor before lookups that need Spark fail: after the last one was
# lost, and after a session started (the executors launch a JVM each, then register).
NO_EXECUTOR_GRACE = 3.0
FIRST_EXECUTOR_GRACE = 10.0
POLL_INTERVAL = 0.25
# The job tag of the Spark jobs that fail when there is no executor (lookups' keyed jobs).
NEEDS_EXECUTORS_TAG = "pomoview-needs-executors"


class NoExecutors(Unavailable):
    """The Spark cluster has no executor for this server's jobs."""


@dataclass(frozen=True)
class SparkStatus:
    """`executors`: how many the application can run tasks on (1 in local mode: the driver);
    -1 while the session is starting or restarting. `summary`: one line saying so."""

    executors: int
    summary: str


def count_executors(session: SparkSession, master: str) -> int:
    """The executors the session's application has now (the driver counts only in local mode)."""
    if is_local_master(master):
        return 1
    infos = session.sparkContext._jsc.sc().statusTracker().getExecutorInfos()  # type: ignore[union-attr]
    return max(0, len(infos) - 1)  # the tracker lists the driver too


class ExecutorWatch:
    """Polls the executors of the session `session()` returns (None: none is up), from a
    daemon thread, and fails lookups fast when there are none (see the module's docstring).
    `on_change(status)` is called from that thread when the status changes."""

    def __init__(
        self,
        master: str,
        session: Callable[[], SparkSession | None],
        *,
        grace: float = NO_EXECUTOR_GRACE,
        first_grace: float = FIRST_EXECUTOR_GRACE,
        poll: float = POLL_INTERVAL,
        on_change: Callable[[SparkStatus], None] | None = None,
        count: Callable[[SparkSession, str], int] = count_executors,
    ) -> None:
        self.master = master
        self._session = session
        self._grace = grace
        self._first_grace = first_grace
        self._poll = poll
        self.on_change = on_change
        self._count_of = count
        self._lock = threading.Lock()
        self._last_session: SparkSession | None = None
        self._count: int | None = None  # None: no session, or it did not answer
        self._seen = False  # whether the current session has had an executor
        self._zero_since = 0.0  # since when the count has been 0 (monotonic)
        self._cancels = 0  # rounds of cancelled guarded jobs, so a guard knows its job was one
        self._active = 0  # guarded jobs running
        self._status: SparkStatus | None = None
        self._reported: tuple[int, bool] | None = None  # the last status reported, and if expired
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="spark-executors", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 (the watch must outlive a bad poll)
                log.warning("watching the Spark executors failed", exc_info=True)

    def poll(self) -> SparkStatus:
        """Counts the executors once; cancels the guarded jobs if there has been none for too
        long. Returns the status (and reports it to `on_change` if it changed)."""
        session = self._session()
        count: int | None = None
        if session is not None:
            try:
                count = self._count_of(session, self.master)
            except Exception:  # noqa: BLE001 (a dying session: the provider reports it)
                log.debug("counting the Spark executors failed", exc_info=True)
        now = time.monotonic()
        with self._lock:
            if session is not self._last_session:
                self._last_session, self._seen, self._zero_since = session, False, now
            if count is not None and count > 0:
                self._seen = True
            if count == 0 and self._count != 0 and self._seen:
                self._zero_since = now  # the last executor was just lost
            self._count = count
            cancel = self._expired(now) and self._active > 0
            if cancel:
                self._cancels += 1
            status = self._status_locked(now)
            expired = self._expired(now)
            changed = (status.executors, expired) != self._reported
            self._status, self._reported = status, (status.executors, expired)
        if cancel and session is not None:
            with contextlib.suppress(Exception):  # a dead session: its callers fail on their own
                session.sparkContext.cancelJobsWithTag(NEEDS_EXECUTORS_TAG)
        if changed:
            self._report(status, expired)
        return status

    def _report(self, status: SparkStatus, expired: bool) -> None:
        if expired:
            log.warning("%s", status.summary)
        elif status.executors > 0:
            log.info("%s", status.summary)
        if self.on_change is not None:
            self.on_change(status)

    def _expired(self, now: float) -> bool:
        """Whether lookups fail now: no executor for longer than the grace."""
        limit = self._grace if self._seen else self._first_grace
        return self._count == 0 and now - self._zero_since >= limit

    def _status_locked(self, now: float) -> SparkStatus:
        if self._count is None:
            return SparkStatus(-1, f"Spark ({self.master}): the session is starting")
        if self._count > 0:
            plural = "s" if self._count > 1 else ""
            return SparkStatus(self._count, f"Spark ({self.master}): {self._count} executor{plural}")
        return SparkStatus(0, self._no_executors_locked(now))

    def _no_executors_locked(self, now: float) -> str:
        since = now - self._zero_since
        what = (
            f"has had no executor for this server for {since:.0f} s"
            if self._seen
            else f"has given this server no executor in the {since:.0f} s since its session started"
        )
        return (
            f"the Spark cluster {self.master} {what}: lookups that need Spark fail until a worker "
            "gives it one (keys in memory still answer, writes are still accepted)"
        )

    def status(self) -> SparkStatus:
        """The status at the last poll (polls now if there was none yet)."""
        with self._lock:
            status = self._status
        return status if status is not None else self.poll()

    @contextlib.contextmanager
    def guard(self, spark: SparkSession | None) -> Iterator[None]:
        """Runs the body's Spark jobs (started on this thread, on the session `spark`) as ones
        that need an executor: once there has been none for too long, the poll cancels them
        (a job that starts then is cancelled at the next poll), and what the body raises
        becomes NoExecutors. A body that starts no job (a source with nothing in Parquet yet)
        is not affected. With no session (None), or in local mode, the body runs as it is."""
        if spark is None or is_local_master(self.master):  # local: the driver runs the tasks
            yield
            return
        context = spark.sparkContext
        context.addJobTag(NEEDS_EXECUTORS_TAG)  # raises if the session is dead: nothing to undo
        with self._lock:
            self._active += 1
            before = self._cancels
        try:
            yield
        except Exception as err:
            with self._lock:
                cancelled = self._cancels != before
                message = self._no_executors_locked(time.monotonic())
            if cancelled:
                raise NoExecutors(message) from err
            raise
        finally:
            with self._lock:
                self._active -= 1
            with contextlib.suppress(Exception):  # a dead session has no tags left to remove
                context.removeJobTag(NEEDS_EXECUTORS_TAG)
