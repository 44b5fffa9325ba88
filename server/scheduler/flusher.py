"""The flusher: moves applied batches into Parquet, trims the log behind what is durable there
and what no running upquery still needs, and compacts the store."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pomoview.server.metrics.metrics import Metrics
from pomoview.server.reads.upquery_pins import UpqueryPins
from pomoview.server.spark.deadline import SparkTimeout
from pomoview.server.spark.failure_log import FailureLog
from pomoview.server.spark.session import SparkProviderStopped, is_spark_error, spark_error_reason
from pomoview.server.store.manifest import StoreWriteError
from pomoview.server.store.source_store import SourceStore
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.types import LoggedBatch
from pomoview.server.views.log_tail import free_in_slices
from pomoview.server.views.view_state import ViewState
from pomoview.server.wal.wal import WriteAheadLog

log = logging.getLogger("pomoview.scheduler")

# The flusher compacts a source once it has this many parts (or parts clustered otherwise
# than the source is now), at most once every `compact_interval` seconds.
COMPACT_MIN_PARTS = 8
COMPACT_INTERVAL = 0.0


class Flusher:
    """Flushes every `flush_interval` seconds (`flush_loop`, until `stopping` is set), and
    compacts; `flush` and `compact` also run on demand.

    `lock` is held for a whole flush (one at a time); an install and a bulk load take it
    too, before the write lock (`write_lock`, which a flush takes to rotate the log). The
    trim of the tail takes the dataflow lock, then the pins' (see `UpqueryPins`).
    """

    def __init__(
        self,
        view: ViewState,
        pins: UpqueryPins,
        store: SourceStore,
        wal: WriteAheadLog,
        write_lock: threading.Lock,
        time_path: TimePath,
        metrics: Metrics,
        spark: Callable[[], object],
        data_dir: Path,
        stopping: threading.Event,
        *,
        flush_interval: float,
    ) -> None:
        self._view = view
        self._pins = pins
        self._store = store
        self._wal = wal
        self._write_lock = write_lock
        self._time = time_path
        self._metrics = metrics
        self._spark = spark
        self._data_dir = data_dir
        self._stopping = stopping
        self.flush_interval = flush_interval
        self.compact_min_parts = COMPACT_MIN_PARTS
        self.compact_interval = COMPACT_INTERVAL
        self.lock = threading.Lock()  # one flush at a time
        self._flush_failures = FailureLog(log, "a flush")
        self._compact_failures = FailureLog(log, "a compaction")

    def flush_loop(self) -> None:
        last_compaction = time.monotonic()
        while not self._stopping.wait(self.flush_interval):
            try:
                self.flush()
            except Exception as err:
                self._log_failure("a flush", err)
                continue
            self._flush_failures.succeeded()
            if time.monotonic() - last_compaction >= self.compact_interval:
                last_compaction = time.monotonic()
                try:
                    self.compact()
                except Exception as err:
                    self._log_failure("a compaction", err)
                else:
                    self._compact_failures.succeeded()

    def _log_failure(self, what: str, err: Exception) -> None:
        """One line naming the failure's cause (the store's own message for a full disk or a
        Spark job past its deadline, else `spark_error_reason`), its traceback at DEBUG; a
        failure that repeats is logged again only with its count (`FailureLog`). Either way
        the log is not trimmed, and the next interval tries again."""
        if isinstance(err, SparkProviderStopped):  # no retry: the server is stopping
            log.info(
                "%s did not run: the server is stopping; the store stays at version %d, the log "
                "keeps every epoch after it (through %d)",
                what,
                self._store.version,
                self._view.durable_epoch,
            )
            return
        # A failure that repeats (every interval) is logged once, then with a count; the
        # reason names the cause (not the stack trace, which goes to DEBUG).
        known = isinstance(err, (StoreWriteError, SparkTimeout))
        reason = str(err) if known else spark_error_reason(err)
        failures = self._flush_failures if what == "a flush" else self._compact_failures
        failures.failed(
            reason,
            f"; retrying every {self.flush_interval:g} s; the store stays at version "
            f"{self._store.version}, the log keeps every epoch after it (through "
            f"{self._view.durable_epoch})",
            err,
            trace=not known and not is_spark_error(err),  # a bug of ours: its traceback
        )

    def flush(self) -> int:
        """Moves the applied batches the store lacks into Parquet, then trims the log;
        returns the store's version."""
        view = self._view
        with view.lock:
            pending = self._unflushed()
        if any(c.inserts or c.deletes for b in self._time.storable(pending) for c in b.changes.values()):
            # The session first, outside the flush lock, which an install takes: an install
            # must not wait behind a flush that waits for the JVM to boot (a minute, at worst).
            # Only rows bound for Parquet need Spark (transient sources' never go there).
            self._spark()
        with self.lock:
            started = time.perf_counter()
            with view.lock:
                batches = self._unflushed()
                # The @next state at the last of them (the applied epoch), if the program has any.
                checkpoint = self._time.checkpoint() if batches else None
            if batches:
                if checkpoint is not None:
                    # Durable before the store publishes its epoch: the checkpoint is never
                    # behind the store, whose log tail replays it forward (time_state.py).
                    assert checkpoint.epoch == batches[-1].epoch, (checkpoint.epoch, batches[-1].epoch)
                    checkpoint.write(self._data_dir)
                with self._write_lock:
                    self._wal.rotate()
                self._store.flush(self._time.storable(batches))
                assert checkpoint is None or checkpoint.epoch >= self._store.version
            durable = self._truncate_log()
            if batches:  # an idle flush every interval would only bury the real ones near 0
                self._metrics.flush_seconds.observe(time.perf_counter() - started)
            return durable

    def _unflushed(self) -> list[LoggedBatch]:
        """The applied batches the store lacks (under the dataflow lock). The tail may still
        hold flushed batches that a running lookup needs."""
        stored = self._store.version
        return [b for b in self._view.tail.flushable(self._view.applied_epoch) if b.epoch > stored]

    def _truncate_log(self) -> int:
        """Trims the log behind what is durable in Parquet and what no running upquery needs.

        The overlay reads the in-memory tail (lookups.py): a running lookup needs every
        batch after the version of each snapshot it pinned (`UpqueryPins`), until it ends.
        The store published its version before this runs, so a pin taken after the pins
        are read below is at that version or later (see `UpqueryPins`). The log on disk is
        read only at restart, from the store's version on; it is trimmed to the same bound,
        its segments whole.
        """
        with self._view.lock, self._pins.frozen() as pinned:
            durable = self._store.version
            bound = min(durable, min(pinned, default=durable))
            assert all(bound <= v for v in pinned), "the tail must outlive the pins"
            garbage = self._view.tail.trim_through(bound)
        free_in_slices(garbage)  # outside the lock, and in slices (log_tail.py)
        self._wal.truncate_through(bound)
        return durable

    def compact(self) -> list[str]:
        """Compacts the store's sources that have `compact_min_parts` parts or more (Spark
        jobs, while writes and lookups go on); returns the sources compacted. Compaction
        keeps the content and version of the store: the log is not involved."""
        done = []
        for source in self._store.compaction_candidates(self.compact_min_parts):
            if self._stopping.is_set():
                break
            started = time.perf_counter()
            if self._store.compact(source):
                self._metrics.compaction_seconds.observe(time.perf_counter() - started)
                done.append(source)
        return done
