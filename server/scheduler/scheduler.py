"""The scheduler: owns the program, the write path and the dataflow, and builds the parts
that share them.

Write path (DESIGN §4, write_path.py): validate -> assign the next epoch -> append to the
write-ahead log and fsync -> reply with the epoch -> the dataflow thread (applier.py)
applies the batch to every reader's circuit, one epoch at a time, in order.

Lookups (reads/lookups.py) answer from a reader's state when every key is present;
otherwise they run as a walk in rounds on the dataflow lock, each returning the rows or the
fetches it missed: a keyed Spark job over the Parquet store at its version v
(reads/spark_fetch.py), plus the logged operations in (v, applied], and the next round
resumes where the walk stopped.
The flusher (flusher.py) moves applied batches into Parquet, trims the log behind what is
durable there and what no running upquery still needs (reads/upquery_pins.py), and
compacts the store. The time path (temporal/time_path.py) keeps the state of `@next` rules
and transient sources. What they share is the view state (view_state.py).

Locks, always taken in this order: the flusher's (`Flusher.lock`, one flush, install or
load at a time), the write lock (`WritePath.lock`: epoch counter, log submission), the
dataflow lock (`ViewState.lock`: the graph, the applied epoch, the log tail), the pins'
(`UpqueryPins`), then the store's own. The log's own lock is taken under the write lock
and itself takes the apply queue's (`Applier.on_durable`). A cold lookup takes the
dataflow lock only for its rounds: its jobs pin the store under the pins' lock alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from pomoview.dataflow.introspect import NodeInfo
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.planner.compile import CompiledProgram, ProgramGraph, compile_program
from pomoview.planner.frontend.builtins import BUILTIN_SOURCES, read_only
from pomoview.planner.frontend.errors import ProgramError
from pomoview.server.disk.fileio import OS_FILES, FileIO
from pomoview.server.disk.fsync import fsync_path
from pomoview.server.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable, Unimplemented
from pomoview.server.limits import programs as program_limits
from pomoview.server.limits.requests import Limits
from pomoview.server.load import bulk_load
from pomoview.server.metrics.counters import Counters, ReaderInfo, Stats
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.reads.lookups import Lookups, LookupTrace, OnAnswer
from pomoview.server.reads.spark_fetch import SparkFetch
from pomoview.server.reads.upquery_jobs import UpqueryJobs
from pomoview.server.reads.upquery_pins import UpqueryPins
from pomoview.server.scheduler.applier import DEFAULT_MAX_APPLY_LAG, Applier
from pomoview.server.scheduler.flusher import COMPACT_INTERVAL, COMPACT_MIN_PARTS, Flusher
from pomoview.server.scheduler.graph_stats import GraphStats
from pomoview.server.scheduler.write_path import WritePath
from pomoview.server.spark.deadline import WRITE_SETTING, SparkTimeouts, deadline
from pomoview.server.store.fs import LocalFS
from pomoview.server.store.source_store import SchemaMismatch, SourceStore
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.temporal.time_state import TimeState, uses_time
from pomoview.server.typed_rows import Rows, TypedKeys, TypedRow
from pomoview.server.types import SourceSchema
from pomoview.server.views.introspection import Introspection
from pomoview.server.views.log_tail import LogTail
from pomoview.server.views.memory_budget import MemoryBudget, process_rss
from pomoview.server.views.subscriptions import DEFAULT_BUFFER_ROWS, Subscription, Subscriptions
from pomoview.server.views.view_state import DEFAULT_WHOLE_SOURCE_ROWS, ViewState, WholeSources
from pomoview.server.wal.wal import WriteAheadLog

log = logging.getLogger("pomoview.scheduler")

# A new upquery job waits for more misses on its source until none has arrived for
# UPQUERY_LINGER, and at most UPQUERY_MAX_LINGER: a burst of concurrent misses (a page of 100
# lookups, which reach the dataflow about one per 0.5 ms through gRPC) then costs one Spark
# job per source, for a few milliseconds on a lone miss that takes a hundred or more.
UPQUERY_LINGER = 0.02
UPQUERY_MAX_LINGER = 0.15

__all__ = ["Scheduler", "Stats", "ReaderInfo", "Counters"]

# A load publishes its epoch straight into the store, past the dataflow, so the state of
# `@next` rules and transient sources (stepped by the dataflow at every epoch) would miss it.
_NO_LOAD_WITH_TIME = (
    "{source!r} cannot be bulk loaded: the installed program has @next rules or transient sources, "
    "whose state steps through every epoch; write the rows with Write instead"
)

T = TypeVar("T")
E = TypeVar("E")


class _FlusherSetting(Generic[T]):
    """A setting of the scheduler's flusher, read and set on the scheduler; on the class,
    its default (tests read `Scheduler.compact_min_parts`)."""

    def __init__(self, default: T) -> None:
        self.default = default

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, scheduler: Scheduler | None, owner: type | None = None) -> T:
        if scheduler is None:
            return self.default
        value: T = getattr(scheduler.flusher, self.name)
        return value

    def __set__(self, scheduler: Scheduler, value: T) -> None:
        setattr(scheduler.flusher, self.name, value)


class Scheduler:
    # The flusher's settings (flusher.py), which tests change after construction.
    flush_interval = _FlusherSetting(5.0)
    compact_min_parts = _FlusherSetting(COMPACT_MIN_PARTS)
    compact_interval = _FlusherSetting(COMPACT_INTERVAL)

    def __init__(
        self,
        data_dir: Path,
        spark: Callable[[], object],
        *,
        flush_interval: float = 5.0,
        store_dir: Path | str | None = None,
        full_state: bool = False,
        binary_joins: bool = False,
        memory_budget: int | None = None,
        metrics: Metrics | None = None,
        subscription_buffer: int = DEFAULT_BUFFER_ROWS,
        spark_timeouts: SparkTimeouts | None = None,
        files: FileIO = OS_FILES,
        limits: Limits | None = None,
        max_apply_lag: float = DEFAULT_MAX_APPLY_LAG,
        whole_source_rows: int = DEFAULT_WHOLE_SOURCE_ROWS,
        graph_dropped: Callable[[], None] | None = None,  # serve's: gc_policy.REFREEZE.thaw
    ) -> None:
        # What one request may ask for (`serve`'s limit flags); Install's are checked here.
        self.limits = Limits() if limits is None else limits
        # Partial state is evicted when the process's memory grows past this (None: never);
        # made first, so that its baseline is the RSS before the store and the log are open.
        memory = None if memory_budget is None else MemoryBudget(memory_budget)
        self.data_dir = Path(data_dir)
        files.makedirs_durably(self.data_dir)  # acknowledged writes will live in it
        self._spark = spark
        # The deadlines of the store's Spark jobs: fetches, flushes, compactions, loads.
        self.spark_timeouts = SparkTimeouts() if spark_timeouts is None else spark_timeouts
        self.store = self._open_store(store_dir, files)
        # A registry of this scheduler's own (not the process's global one): tests run several
        # schedulers in one process. `serve` passes one it already exposes.
        self.metrics = Metrics() if metrics is None else metrics
        overflows = self.metrics.subscription_overflows
        subs = Subscriptions(subscription_buffer, on_overflow=overflows.inc)
        self.metrics.subscriptions.set_function(lambda: len(subs.open))
        self.wal = WriteAheadLog(
            self.data_dir / "wal", on_fsync=self.metrics.wal_fsync_seconds.observe, files=files
        )
        self.counters = Counters()
        self._stopping = threading.Event()
        self.threads: list[threading.Thread] = []  # joined by `stop`
        # Comparison runs: `full_state` (no partial state), `binary_joins` (no WcojJoin).
        view = self._recover(subs, memory, full_state, binary_joins, whole_source_rows, graph_dropped)
        self.view_state = view
        view.on_hold(self.metrics.lock_held)
        self.time_path = TimePath(view, self.store, self.data_dir)
        self.time_path.recover()
        batches = len(view.tail.batches)
        log.info("recovered: store version %d, %d logged batches after it", self.store.version, batches)
        self.upquery_pins = UpqueryPins(self.store)
        # Keyed Spark jobs, one at a time per source channel, shared by concurrent misses.
        self.upquery_jobs = UpqueryJobs(
            SparkFetch(self.store, view.require_program, spark, self.counters, self.metrics).run,
            self.upquery_pins.pin,
            self.upquery_pins.unpin,
            linger=UPQUERY_LINGER,
            max_linger=UPQUERY_MAX_LINGER,
        )
        self.graph_stats = GraphStats(view)
        self.introspection = Introspection(view, lambda: self.store.version, self._stopping)
        jobs, counters = self.upquery_jobs, self.counters
        self.lookups = Lookups(view, jobs, self.time_path, self.metrics, counters, self.introspection)
        self.applier = Applier(
            view, self.time_path, self._stopping, max_lag=max_apply_lag, refill=self.lookups.refill,
            settle=self.lookups.settle, after_step=self.graph_stats.after_step,
        )
        self.writes = WritePath(
            view, self.wal, self.metrics, self.time_path, self.applier.on_durable, self.applier.wait_for_room
        )
        self.flusher = Flusher(
            view, self.upquery_pins, self.store, self.wal, self.writes.lock, self.time_path, self.metrics,
            spark, self.data_dir, self._stopping, flush_interval=flush_interval,
        )
        self.metrics.watch(self.stats, lambda: self.program.views if self.program is not None else ())

    # -- start-up -----------------------------------------------------------------

    def _open_store(self, store_dir: Path | str | None, files: FileIO) -> SourceStore:
        # A path, or a URI for the store's Hadoop client (which `Path` would mangle).
        store_root = str(self.data_dir / "store" if store_dir is None else store_dir)
        # `files` (tests: a power-cut layer) carries the log and a local store's operations.
        location = store_root if files is OS_FILES else LocalFS(store_root, files)
        return SourceStore(location, self._spark, timeouts=self.spark_timeouts)  # type: ignore[arg-type]

    def _program_path(self) -> Path:
        return self.data_dir / "program.pomo"

    def _recover(
        self,
        subscriptions: Subscriptions,
        memory: MemoryBudget | None,
        full_state: bool,
        binary_joins: bool,
        whole_rows: int,
        graph_dropped: Callable[[], None] | None,
    ) -> ViewState:
        """The view state at restart: the saved program, and the logged batches after the
        store's version, all counted as applied."""
        path = self._program_path()
        program = compile_program(path.read_text(), path.name) if path.exists() else None
        # Every source ever installed is registered in the store before its first write, so
        # the store knows the schema of everything the log can hold, even of sources the
        # current program no longer declares.
        schemas: dict[str, SourceSchema] = self.store.schemas()
        batches = self.wal.recover(schemas)
        version = self.store.version
        return ViewState(
            program,
            LogTail(version, batches),
            max(self.wal.last_epoch, version),
            subscriptions,
            memory=memory,
            full_state=full_state,
            binary_joins=binary_joins,
            hold_whole=WholeSources(self.store.rows_at_most, whole_rows),
            graph_dropped=graph_dropped,
        )

    def start(self) -> None:
        loops = (self.applier.run, "dataflow"), (self.flusher.flush_loop, "flusher")
        for target, name in (*loops, (self.introspection.run, "introspection")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self.threads.append(thread)
        if self.view_state.memory is not None:  # RSS for the budget, read on no other thread
            self.threads.append(self.view_state.memory.start(self._stopping))

    def stop(self) -> None:
        self._stopping.set()
        self.applier.wake()
        for thread in self.threads:
            thread.join(timeout=10)
        self.lookups.close()
        self.upquery_jobs.close()
        self.wal.close()
        self.metrics.close()

    # -- the view state, as callers read it ---------------------------------------

    @property
    def program(self) -> CompiledProgram | None:
        return self.view_state.program

    @property
    def graph(self) -> ProgramGraph | None:
        return self.view_state.graph

    @property
    def applied_epoch(self) -> int:
        return self.view_state.applied_epoch

    @property
    def durable_epoch(self) -> int:
        return self.view_state.durable_epoch

    @property
    def tail(self) -> LogTail:
        return self.view_state.tail

    @property
    def time(self) -> TimeState | None:
        """The state of the program's `@next` rules and transient sources (time_path.py)."""
        return self.time_path.state

    # -- writes and reads ---------------------------------------------------------

    def write(self, changes: Sequence[tuple[str, Rows, Rows]]) -> int:
        """Validates, logs durably and queues one batch; returns its epoch (write_path.py)."""
        return self.writes.write(changes)

    def lookup(
        self,
        view: str,
        keys: Rows,
        min_epoch: int | None = None,
        timeout: float | None = None,
        on_answer: OnAnswer | None = None,
        trace: LookupTrace | None = None,
    ) -> tuple[list[list[dict[str, object]]], int]:
        """The rows of each key and the epoch they reflect (reads/lookups.py)."""
        return self.lookups.lookup(view, keys, min_epoch, timeout, on_answer, trace)

    def lookup_rows(
        self, view: str, keys: Rows, min_epoch: int | None = None, timeout: float | None = None
    ) -> tuple[list[list[Row]], int]:
        """`lookup`, each row a tuple in the view's attribute order (reads/lookups.py)."""
        return self.lookups.lookup_rows(view, keys, min_epoch, timeout)

    def lookup_encoded(
        self,
        view: str,
        keys: Rows | TypedKeys,
        min_epoch: int | None = None,
        timeout: float | None = None,
        *,
        encoder: Callable[[CompiledProgram, str], Callable[[list[Row]], E]],
        form: str = "",
    ) -> tuple[list[E], int]:
        """`lookup`, each key's rows as `encoder(program, view)` puts them, cached (per
        `form`) for the hits after it (reads/lookups.py)."""
        return self.lookups.lookup_encoded(view, keys, min_epoch, timeout, encoder, form)

    def hits(
        self,
        view: str,
        keys: Rows | TypedKeys,
        min_epoch: int | None,
        encode: Callable[[list[Row]], E],
        form: str = "",
    ) -> tuple[list[E], int] | None:
        """A lookup's answer without any lock when every key is present, else None."""
        return self.lookups.hits(view, keys, min_epoch, encode, form)

    def subscribe(
        self, view: str, keys: Sequence[TypedRow], timeout: float | None = None
    ) -> tuple[list[dict[str, object]], int, Subscription]:
        """The rows of `keys`, their epoch E, and a subscription to their changes after E."""
        return self.lookups.subscribe(view, keys, timeout)

    def unsubscribe(self, sub: Subscription) -> None:
        """Ends `sub` and releases its keys (idempotent)."""
        self.lookups.unsubscribe(sub)

    def flush(self) -> int:
        """Moves the applied batches into Parquet and trims the log; returns the store's version."""
        return self.flusher.flush()

    def compact(self) -> list[str]:
        """Compacts the sources with enough parts; returns them."""
        return self.flusher.compact()

    # -- install ------------------------------------------------------------------

    def install(self, text: str, filename: str = "<program>") -> CompiledProgram:
        program_limits.check_text(self.limits, text)
        try:
            program = compile_program(
                text,
                filename,
                check_parsed=lambda parsed: program_limits.check_parsed(self.limits, parsed, text, filename),
                check_checked=lambda checked: program_limits.check_checked(self.limits, checked, filename),
            )
        except ProgramError as err:
            raise (Unimplemented if err.unsupported else InvalidArgument)(str(err)) from None
        view = self.view_state
        # The flusher's lock first (it takes the write lock inside): a flush's checkpoint of
        # the old program's state never lands after the new program's.
        with self.flusher.lock, self.writes.lock:
            registry = self.time_path.check_transient(program, filename)
            # The store remembers every source ever installed, so it refuses a source whose
            # declaration changed, whether or not the current program still declares it.
            for name in program.checked.sources:
                try:
                    self.store.ensure_source(name, program.source_schema(name))
                except SchemaMismatch as err:
                    raise FailedPrecondition(str(err)) from None
            with view.lock:
                carried = self.time_path.carry(registry)  # before anything changes: it may fail
                self._save_program(text)
                view.program = program
                view.reset_graph()
                checkpoint = self.time_path.install(program, registry, carried)
            checkpoint.write(self.data_dir)
        return program

    def _save_program(self, text: str) -> None:
        """Replaces the stored program atomically and durably: writes acknowledged after an
        install are read back at restart under that program."""
        path = self._program_path()
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        fsync_path(self.data_dir)

    # -- introspection ------------------------------------------------------------

    def dataflow_nodes(self, view: str | None = None) -> list[NodeInfo]:
        """The dataflow built so far (for `view`'s readers only, when given), inputs first."""
        program = self.view_state.require_program()
        if view is not None and view not in program.views:
            known = ", ".join(sorted(program.views)) or "none"
            raise NotFound(f"no view named {view!r} (views: {known})")
        with self.view_state.lock:
            graph = self.view_state.graph
            return [] if graph is None else graph.graph.node_infos(view)

    def stats(self) -> Stats:
        view = self.view_state
        memory = view.memory
        # The lag and the epochs at one instant, before the graph's reading (which may wait).
        rss, lag, applied, durable = process_rss(), self.applier.lag(), view.applied_epoch, view.durable_epoch
        graph = self.graph_stats.read()  # without waiting behind a running step (graph_stats.py)
        return Stats(
            applied_epoch=applied,
            durable_epoch=durable,
            flushed_epoch=self.store.version,
            upqueries=self.counters.upqueries,
            spark_jobs=self.counters.spark_jobs,
            dropped_deltas=graph.dropped,
            readers=graph.readers,
            states=graph.states,
            memory_budget=memory.budget if memory else 0,
            rss_bytes=rss,
            baseline_rss_bytes=memory.baseline if memory else 0,
            partial_state_bytes=graph.partial_bytes,
            eviction_rounds=memory.evictions if memory else 0,
            apply_lag_seconds=lag,
            apply_lag_epochs=durable - applied,
            states_epoch=graph.epoch,
        )

    # -- bulk load ----------------------------------------------------------------

    def load(
        self,
        source: str,
        path: str,
        fmt: str = "",
        options: Mapping[str, str] | None = None,
        progress: bulk_load.ProgressFn | None = None,
        cancelled: threading.Event | None = None,
    ) -> tuple[int, int]:
        """Imports a CSV, Parquet or JSON-lines file into `source` as one epoch; returns
        (rows in the file, epoch). Duplicates and rows already present are fine (sets).

        The file is read once, by one Spark job (`bulk_load`), under the flusher's lock and
        the write lock, so that no flush or write interleaves: the load's epoch E is the next
        one and nothing else can take it while the locks are held, so the job types every
        row and writes them as the store's part of inserts at E, durable but unpublished.
        A row that does not fit fails that job, and nothing changes: the locks are released,
        and a pass of its own (outside them) names the first such row, `FILE:ROW` and reason.
        A file changed during the pass is refused. Then an empty marker record for E goes
        through the log (it settles every write submitted before, and keeps E from being
        reused whatever happens next, restart included); once the dataflow has applied every
        earlier batch, the log tail is flushed into the store, and the store publishes the
        part as version E, atomically (a crash before that leaves nothing, and the next open
        deletes the part). The marker never reaches the dataflow: a failure after it leaves
        E an empty epoch. Writes wait while this runs; lookups go on, at the epoch before E.

        The dataflow is brought up to date by evicting what the load touched: a Spark job
        per key of the source's indexes finds the loaded rows' keys, and the publication
        evicts those that are present, at every index of the source and below it
        (`Graph.evict_loaded`); the next reads of them refill from the store, which now
        holds the load, and every other key stays warm. Feeding millions of rows through
        the circuits would cost more than refilling the keys that are read again. When
        that cannot keep every state right (a full state reads the source, a touched key
        is subscribed), every circuit is dropped instead. This is done, together with the
        applied and durable epochs moving to E, under the dataflow lock held across the
        store's publish, so no lookup ever answers with E's rows at an earlier epoch, or
        at E without them.
        """
        schema = self._loadable(source, path, fmt, options)
        try:
            spark = self._spark()
        except Exception as err:
            raise Unavailable(f"the load cannot start: Spark is unavailable ({err})") from err
        with bulk_load.LoadJob(spark, progress, cancelled) as job:  # type: ignore[arg-type]
            with deadline(
                spark, self.spark_timeouts.write, f"the load's check of {path}", WRITE_SETTING  # type: ignore[arg-type]
            ):
                plan = job.plan(path, fmt, dict(options or {}), source, schema)
            try:
                with job.phase("writing", 0.0, 1.0):
                    loaded = self._load_locked(job, plan)
            except bulk_load.BadInput:
                # Outside the locks: the pass that names the bad row reads the whole file.
                with deadline(
                    spark, self.spark_timeouts.write, f"the load's check of {path}", WRITE_SETTING  # type: ignore[arg-type]
                ):
                    refusal = job.refusal(plan)
                raise refusal from None
        if loaded[0]:
            self.metrics.epochs_committed.inc()
        return loaded

    def _loadable(
        self, source: str, path: str, fmt: str, options: Mapping[str, str] | None
    ) -> SourceSchema:
        """`source`'s schema, once the checks of a load that need no Spark have passed."""
        program = self.view_state.require_program()
        relation = program.relations.get(source)
        if source in BUILTIN_SOURCES:
            raise InvalidArgument(read_only(source))
        if relation is None or relation.kind != "source":
            known = ", ".join(sorted(program.checked.sources)) or "none"
            raise NotFound(f"no source named {source!r} (sources: {known})")
        if uses_time(program):
            raise FailedPrecondition(_NO_LOAD_WITH_TIME.format(source=source))
        schema = program.source_schema(source)
        cids = [a for a, t in schema if t == "cid"]
        if cids:
            # A load's Spark job checks each value's type but not a CID's text (write_rows does).
            raise Unimplemented(
                f"{source!r} has the cid attribute {cids[0]!r}, which a load cannot check yet; "
                "write its rows with Write"
            )
        # Before waiting for Spark (its JVM may still be booting): a request that names no
        # readable file, or a bad format or option, is refused at once.
        bulk_load.check_path(path)
        resolved = bulk_load.resolve_format(path, fmt)
        if resolved == "csv":
            bulk_load.csv_options(options or {})
        elif options:
            raise InvalidArgument(f"{resolved} takes no options (given: {', '.join(sorted(options))})")
        return schema

    def _loaded_keys(
        self, job: bulk_load.LoadJob, plan: bulk_load.Plan
    ) -> dict[tuple[int, ...], set[Key]] | None:
        """The keys the load's rows hold at each key of the source's indexes now (a Spark
        job each), so that the publication evicts only those (`Graph.evict_loaded`); None
        when a full state reads the source (the graph is rebuilt)."""
        with self.view_state.lock:
            graph = self.view_state.graph
            needed = [] if graph is None else graph.graph.loaded_keys_needed(plan.source)
        if needed is None:
            return None
        with job.failures(plan.path):
            return {cols: job.distinct_keys(plan, cols) for cols in needed}

    def _load_locked(self, job: bulk_load.LoadJob, plan: bulk_load.Plan) -> tuple[int, int]:
        """`load` under the flusher's lock and the write lock: the load's epoch E is the next
        one, and stays free while the locks are held, so the one pass writes its part at E;
        then the marker, the log's tail, and the part's publication (see `load`)."""
        source, path = plan.source, plan.path
        view = self.view_state
        # The flusher's lock first (it takes the write lock inside): no flush runs meanwhile.
        with self.flusher.lock, self.writes.lock:
            now = view.program
            if uses_time(now):
                raise FailedPrecondition(_NO_LOAD_WITH_TIME.format(source=source))
            if now is None or source not in now.checked.sources or now.source_schema(source) != plan.schema:
                raise FailedPrecondition(
                    f"the program changed during the load of {source!r}; nothing was loaded"
                )
            epoch = self.writes.next_epoch()
            staged, count = job.run(
                plan,
                lambda rows: self.store.stage_load(source, rows, epoch),
                self.store.discard_load,
            )
            if count == 0 or staged is None:
                self.store.discard_load(staged)
                return 0, view.durable_epoch
            try:
                try:
                    self.writes.log_marker(epoch)
                except OSError as err:
                    raise Unavailable(f"the write-ahead log could not be written: {err}") from None
                with view.lock:
                    while view.applied_epoch < view.durable_epoch:
                        if self._stopping.is_set():
                            raise Unavailable("the server is stopping; nothing was loaded")
                        view.lock.wait(timeout=0.5)
                    pending = view.tail.flushable(view.applied_epoch)
                self.wal.rotate()
                with job.failures(path):
                    # The store's epochs stay contiguous: the log's batches go in below the load.
                    self.store.flush([b for b in pending if b.epoch > self.store.version])
                # The keys the load touches, to evict them alone when it is published.
                touched = self._loaded_keys(job, plan)
            except BaseException:
                self.store.discard_load(staged)
                raise

            @contextlib.contextmanager
            def publishing() -> Iterator[None]:
                with view.lock:
                    yield  # the store publishes version `epoch` here
                    view.load_at(
                        epoch,
                        lambda graph: touched is not None and graph.graph.evict_loaded(source, touched),
                    )

            with job.failures(path):
                self.store.publish_load(staged, publishing())
            self.wal.truncate_through(epoch)
            return count, epoch
