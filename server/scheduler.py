"""The scheduler: owns the program, the write path and the dataflow.

Write path (DESIGN §4): validate -> assign the next epoch -> append to the
write-ahead log and fsync -> reply with the epoch -> the dataflow thread
applies the batch to every reader's circuit, one epoch at a time, in order.

Lookups answer from a reader's state when every key is present; otherwise
they upquery, on the dataflow lock, through `fetch`: a keyed Spark job over the
Parquet store at its version v, plus the logged operations in (v, applied].
The flusher moves applied batches into Parquet, trims the log behind what is
durable there and what no running upquery still needs, and compacts the store.

Locks, always taken in this order: `_write_lock` (epoch counter, log submission)
then `_dataflow` (circuits, applied epoch, the log tail). The log's own lock is
taken under `_write_lock` and itself takes `_queue_ready` (in `_on_durable`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.keyed_state import Key, Row
from pomoview.dataflow.node import Fetch, FetchPending, Filters, matches
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram, compile_program
from pomoview.planner.errors import Diagnostic, ProgramError

from . import bulk_load
from .errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
)
from .fsync import fsync_path
from .overlay import LogTail
from .source_store import Pin, SchemaMismatch, SourceStore
from .spark_session import SparkSessionLost, spark_error_reason
from .types import LoggedBatch, SourceChange, SourceSchema, Tuple_, Value
from .wal import WalUnusable, WriteAheadLog

log = logging.getLogger("pomoview.scheduler")

# A value as it arrived on the wire: (type name, Python value).
TypedValue = tuple[str, Value]
TypedRow = Mapping[str, TypedValue]


MAX_UPQUERY_ROUNDS = 64


@dataclass(frozen=True)
class Prefetched:
    """A keyed Spark job's answer: `source` at store `version`, restricted to `keys` and to
    the tuples matching `filters` (attribute == value)."""

    source: str
    columns: tuple[str, ...]
    keys: frozenset[Key]
    version: int
    tuples: list[Tuple_]
    filters: Filters = ()


@dataclass
class Counters:
    upqueries: int = 0
    spark_jobs: int = 0


@dataclass
class ReaderInfo:
    view: str
    key: tuple[str, ...]
    partial: bool
    present_keys: int


@dataclass
class Stats:
    applied_epoch: int
    durable_epoch: int
    flushed_epoch: int
    upqueries: int
    spark_jobs: int
    dropped_deltas: int
    readers: list[ReaderInfo] = field(default_factory=list)


def _coerce(value: TypedValue, expected: str, where: str) -> Value:
    kind, raw = value
    if kind == expected:
        return raw
    if kind == "int" and expected == "float":
        return float(raw)  # an int literal where a float is declared loses nothing
    raise InvalidArgument(f"{where}: expected {expected}, got {kind} {raw!r}")


def _typed_tuple(row: TypedRow, schema: SourceSchema, where: str) -> Tuple_:
    names = [a for a, _ in schema]
    missing = [a for a in names if a not in row]
    extra = sorted(a for a in row if a not in names)
    if missing:
        raise InvalidArgument(f"{where}: missing attribute {', '.join(missing)}")
    if extra:
        raise InvalidArgument(
            f"{where}: unknown attribute {', '.join(extra)} (it has {', '.join(names)})"
        )
    return tuple(_coerce(row[a], t, f"{where}: attribute {a!r}") for a, t in schema)


def _refuse_time_features(program: CompiledProgram, filename: str) -> None:
    """Refuses `@next` rules and transient sources, with their positions.

    The planner and the in-process engine run them, but the server cannot yet: the hidden
    `p@next` relations would need their own durable state (they depend on the whole history,
    not on the sources at one epoch), and a transient source's tuples would have to leave the
    store and the circuits at the next epoch.
    """
    diagnostics = [
        Diagnostic(rule.position, "an inductive rule (@next) is not served by the server yet")
        for relation in program.relations.values()
        for rule in relation.rules
        if rule.inductive
    ] + [
        Diagnostic(relation.position, "a transient source is not served by the server yet")
        for relation in program.relations.values()
        if relation.transient
    ]
    if diagnostics:
        diagnostics.sort(key=lambda d: (d.position.line, d.position.column))
        raise ProgramError(diagnostics, program.text, filename, unsupported=True)


class Scheduler:
    def __init__(
        self,
        data_dir: Path,
        spark: Callable[[], object],
        *,
        flush_interval: float = 5.0,
        store_dir: Path | str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.flush_interval = flush_interval
        self._spark = spark
        # A path, or a URI for the store's Hadoop client (which `Path` would mangle).
        store_root = str(self.data_dir / "store" if store_dir is None else store_dir)
        self.store = SourceStore(store_root, spark)  # type: ignore[arg-type]
        self.wal = WriteAheadLog(self.data_dir / "wal")
        self.program: CompiledProgram | None = None
        self.circuits: dict[tuple[str, tuple[str, ...]], Circuit] = {}
        self.counters = Counters()
        self._counter_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._last_assigned = 0  # highest epoch handed to the log, whether or not it committed
        self._dataflow = threading.Condition(threading.Lock())
        self._queue: deque[LoggedBatch] = deque()
        self._queue_ready = threading.Condition(threading.Lock())
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._flushing = threading.Lock()  # one flush at a time
        # The store versions running lookups have pinned, with how many pins each: the log tail
        # keeps every batch after them (see `_truncate_log`). Guarded by `_dataflow`.
        self._upquery_versions: Counter[int] = Counter()
        self._recover()

    # -- start-up -----------------------------------------------------------------

    def _program_path(self) -> Path:
        return self.data_dir / "program.pomo"

    def _recover(self) -> None:
        path = self._program_path()
        if path.exists():
            self.program = compile_program(path.read_text(), path.name)
        # Every source ever installed is registered in the store before its first write, so
        # the store knows the schema of everything the log can hold, even of sources the
        # current program no longer declares.
        schemas: dict[str, SourceSchema] = self.store.schemas()
        batches = self.wal.recover(schemas)
        version = self.store.version
        self.tail = LogTail(version, batches)
        self.durable_epoch = max(self.wal.last_epoch, version)
        # No reader exists before the first lookup, so every logged batch counts as applied:
        # a reader built later reads it through the overlay.
        self.applied_epoch = self.durable_epoch
        log.info(
            "recovered: store version %d, %d logged batches after it",
            version,
            len(self.tail.batches),
        )

    def start(self) -> None:
        for target, name in ((self._apply_loop, "dataflow"), (self._flush_loop, "flusher")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()
        with self._queue_ready:
            self._queue_ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=10)
        self.wal.close()

    # -- install ------------------------------------------------------------------

    def install(self, text: str, filename: str = "<program>") -> CompiledProgram:
        try:
            program = compile_program(text, filename)
            _refuse_time_features(program, filename)
        except ProgramError as err:
            raise (Unimplemented if err.unsupported else InvalidArgument)(str(err)) from None
        with self._write_lock:
            # The store remembers every source ever installed, so it refuses a source whose
            # declaration changed, whether or not the current program still declares it.
            for name in program.checked.sources:
                try:
                    self.store.ensure_source(name, program.source_schema(name))
                except SchemaMismatch as err:
                    raise FailedPrecondition(str(err)) from None
            self._save_program(text)
            with self._dataflow:
                self.program = program
                self.circuits.clear()
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

    def _require_program(self) -> CompiledProgram:
        program = self.program
        if program is None:
            raise FailedPrecondition("no program is installed; call Install first")
        return program

    # -- write --------------------------------------------------------------------

    def write(self, changes: Sequence[tuple[str, Sequence[TypedRow], Sequence[TypedRow]]]) -> int:
        """Validates, logs durably and queues one batch; returns its epoch."""
        program = self._require_program()
        merged: dict[str, tuple[dict[Tuple_, None], dict[Tuple_, None]]] = {}
        for index, (source, inserts, deletes) in enumerate(changes):
            relation = program.relations.get(source)
            if relation is None or relation.kind != "source":
                known = ", ".join(sorted(program.checked.sources))
                raise InvalidArgument(
                    f"changes[{index}]: unknown source {source!r} (sources: {known})"
                )
            schema = program.source_schema(source)
            ins, dels = merged.setdefault(source, ({}, {}))
            for kind, rows, out in (("inserts", inserts, ins), ("deletes", deletes, dels)):
                for i, row in enumerate(rows):
                    out[_typed_tuple(row, schema, f"{source} {kind}[{i}]")] = None
        for source, (ins, dels) in merged.items():
            both = [t for t in ins if t in dels]
            if both:
                raise InvalidArgument(f"{source}: the batch both inserts and deletes {both[0]!r}")
        batch_changes = {
            s: SourceChange(tuple(ins), tuple(dels))
            for s, (ins, dels) in merged.items()
            if ins or dels
        }
        try:
            # Assigning the epoch and queueing the record under one lock keeps epoch order equal
            # to log order; the fsync happens outside it, shared with the writers queued
            # meanwhile (group commit). A refused epoch is skipped, never reused: later epochs
            # may already be queued behind it, and recovery accepts gaps.
            with self._write_lock:
                if not batch_changes:
                    return self.durable_epoch
                epoch = max(self._last_assigned, self.durable_epoch) + 1
                commit = self.wal.submit(LoggedBatch(epoch, batch_changes), self._on_durable)
                self._last_assigned = epoch
            commit.wait()
        except WalUnusable as err:
            raise Unavailable(f"{err}; the write was not committed") from None
        except OSError as err:
            cls = ResourceExhausted if err.errno in (errno.ENOSPC, errno.EDQUOT) else Unavailable
            raise cls(
                f"the write-ahead log could not be written: {err}; the write was not committed"
            ) from None
        return epoch

    def _on_durable(self, batch: LoggedBatch) -> None:
        """Called by the log, in log order, once `batch` is durable and before its writer is
        acknowledged: so the dataflow applies only logged batches, in epoch order."""
        self.durable_epoch = batch.epoch
        with self._queue_ready:
            self._queue.append(batch)
            self._queue_ready.notify()

    def _apply_loop(self) -> None:
        while not self._stopping.is_set():
            with self._queue_ready:
                while not self._queue and not self._stopping.is_set():
                    self._queue_ready.wait(timeout=0.5)
                if not self._queue:
                    continue
                batch = self._queue.popleft()
            try:
                self._apply(batch)
            except Exception:  # a bug in one circuit must not stop the write path
                log.exception("applying epoch %d failed", batch.epoch)

    def _apply(self, batch: LoggedBatch) -> None:
        ops: dict[str, ZSet[Row]] = {}
        for source, change in batch.changes.items():
            zset: ZSet[Row] = ZSet()
            for t in change.inserts:
                zset.add(t, 1)
            for t in change.deletes:
                zset.add(t, -1)
            ops[source] = zset
        with self._dataflow:
            self.tail.append(batch)
            failed = []
            for name, circuit in self.circuits.items():
                try:
                    circuit.step(ops)
                except Exception:
                    log.exception(
                        "circuit %s failed at epoch %d; it will be rebuilt", name, batch.epoch
                    )
                    failed.append(name)
            for name in failed:
                del self.circuits[name]
            self.applied_epoch = batch.epoch
            self._dataflow.notify_all()

    # -- lookup -------------------------------------------------------------------

    def _fetch_from(self, answers: list[Prefetched]) -> Fetch:
        """A Fetch for the dataflow that answers from Spark results fetched before this round.

        It runs on the dataflow lock, so the applied epoch and the log tail stand still
        while it advances a snapshot to the applied epoch with the logged writes after it.
        A request no answer covers raises FetchPending: the lookup then runs that Spark
        job without the lock, and tries again.

        An answer at version v is advanced with the tail's batches after v. The lookup pinned
        v before its job ran, and the flusher never trims the tail past a pinned version, so
        the tail still holds them. Only a bulk load moves the tail's base past a pinned
        version: its rows never pass through the log, so the answers from before it are
        stale (`version < base`) and are fetched again.
        """

        def fetch(
            source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
        ) -> Iterable[Row]:
            wanted = set(keys)
            for answer in answers:
                if (
                    answer.source == source
                    and answer.columns == cols
                    and wanted <= answer.keys
                    and set(answer.filters) <= set(filters)
                    and answer.version >= self.tail.base
                ):
                    schema = [a for a, _ in self._require_program().source_schema(source)]
                    positions = [schema.index(c) for c in cols]
                    tests = tuple((schema.index(a), v) for a, v in filters)
                    tuples = answer.tuples
                    if wanted != answer.keys:
                        tuples = [t for t in tuples if tuple(t[i] for i in positions) in wanted]
                    if set(answer.filters) != set(filters):
                        tuples = [t for t in tuples if matches(t, tests)]
                    return self.tail.overlay(
                        source, tuples, answer.version, self.applied_epoch, positions, keys, tests
                    )
            raise FetchPending(source, cols, keys, filters)

        return fetch

    def _run_spark_fetch(self, pending: FetchPending, pin: Pin) -> Prefetched:
        """One keyed Spark job over the Parquet store at the pinned snapshot `pin`, run without
        any scheduler lock."""
        with self._counter_lock:
            self.counters.spark_jobs += 1
        try:
            version, tuples = self.store.fetch(
                pending.source, pending.columns, pending.keys, dict(pending.filters), at=pin  # type: ignore[arg-type]
            )
        except Exception as err:
            # Nothing is filled: the circuit saw only FetchPending, so the states that asked
            # stay missing and the next lookup runs the job again.
            raise Unavailable(self._spark_failure(pending.source, err)) from err
        return Prefetched(
            pending.source, pending.columns, frozenset(pending.keys), version, tuples, pending.filters
        )

    def _spark_failure(self, source: str, err: Exception) -> str:
        """The reason a keyed Spark job on `source` failed; if the Spark session died with it,
        the provider starts a new one and the reason says so."""
        if isinstance(err, SparkSessionLost):
            dead: str | None = err.reason
        else:
            check = getattr(self._spark, "check", None)
            dead = check() if callable(check) else None
        if dead is not None:
            return (
                f"the upquery on source {source!r} failed: the Spark session died ({dead}); "
                "a new one is starting, retry the lookup"
            )
        return f"the upquery on source {source!r} failed in Spark: {spark_error_reason(err)}"

    def lookup(
        self,
        view: str,
        keys: Sequence[TypedRow],
        min_epoch: int | None = None,
        timeout: float | None = None,
    ) -> tuple[list[list[dict[str, Value]]], int]:
        program = self._require_program()
        relation = program.relations.get(view)
        if view not in program.views or relation is None:
            known = ", ".join(sorted(program.views)) or "none"
            raise NotFound(f"no view named {view!r} (views: {known})")
        if not keys:
            return [], self.applied_epoch
        key_attrs = tuple(keys[0])
        for i, key in enumerate(keys):
            if set(key) != set(key_attrs):
                raise InvalidArgument(f"keys[{i}] names {sorted(key)}, keys[0] names {sorted(key_attrs)}")
        unknown = [a for a in key_attrs if a not in relation.attributes]
        if unknown:
            raise InvalidArgument(
                f"{view!r} has no attribute {', '.join(unknown)} (it has {', '.join(relation.attributes)})"
            )
        key_attrs = tuple(a for a in relation.attributes if a in key_attrs)
        key_tuples = [
            tuple(_coerce(k[a], relation.types[a], f"keys[{i}].{a}") for a in key_attrs)
            for i, k in enumerate(keys)
        ]
        if min_epoch is not None:
            self._wait_applied(min_epoch, None if timeout is None else time.monotonic() + timeout)
        answers: list[Prefetched] = []
        pins: list[Pin] = []
        missed = False
        try:
            # Each round either answers or names one Spark job it needs; the circuit has
            # finitely many source indexes, so a lookup needs few rounds.
            for _ in range(MAX_UPQUERY_ROUNDS):
                with self._dataflow:
                    if self.program is not program:
                        raise Unavailable("the program was replaced during the lookup; retry")
                    try:
                        rows = self._lookup_locked(program, view, key_attrs, key_tuples, answers)
                    except FetchPending as pending:
                        needed = pending
                        missed = True
                        # Pinned on the dataflow lock, which the flusher trims the tail under:
                        # the tail keeps the writes after this snapshot until the lookup ends.
                        pin = self.store.pin()
                        pins.append(pin)
                        self._upquery_versions[pin.version] += 1
                    else:
                        epoch = self.applied_epoch
                        break
                answers.append(self._run_spark_fetch(needed, pin))
            else:
                raise Unavailable(f"the upquery for {view!r} did not settle in {MAX_UPQUERY_ROUNDS} rounds")
        finally:
            if pins:
                self._unpin(pins)
        if missed:
            with self._counter_lock:
                self.counters.upqueries += 1
        attrs = relation.attributes
        return [[dict(zip(attrs, row, strict=True)) for row in group] for group in rows], epoch  # type: ignore[misc]

    def _unpin(self, pins: list[Pin]) -> None:
        with self._dataflow:
            for pin in pins:
                self._upquery_versions[pin.version] -= 1
                if not self._upquery_versions[pin.version]:
                    del self._upquery_versions[pin.version]
        for pin in pins:
            self.store.unpin(pin)

    def _wait_applied(self, min_epoch: int, deadline: float | None) -> None:
        with self._dataflow:
            if min_epoch > self.durable_epoch:
                raise OutOfRange(
                    f"min_epoch {min_epoch} is ahead of the last committed epoch {self.durable_epoch}"
                )
            while self.applied_epoch < min_epoch:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise DeadlineExceeded(f"epoch {min_epoch} was not applied in time")
                self._dataflow.wait(timeout=remaining)

    def _lookup_locked(
        self,
        program: CompiledProgram,
        view: str,
        key_attrs: tuple[str, ...],
        key_tuples: list[Key],
        answers: list[Prefetched],
    ) -> list[list[Row]]:
        name = (view, key_attrs)
        fetch = self._fetch_from(answers)
        circuit = self.circuits.get(name)
        if circuit is None:
            # Building hydrates the full states; a FetchPending here discards the new circuit.
            circuit = program.build_reader(view, key_attrs, fetch)
            self.circuits[name] = circuit
        else:
            circuit.set_fetch(fetch)
        try:
            return circuit.lookup(key_tuples)
        except FetchPending:
            raise  # every state is filled completely or untouched: keep the circuit
        except Exception:
            # Anything else may have left a state half filled: drop the circuit so that it
            # is never read (it is rebuilt at the next lookup).
            del self.circuits[name]
            raise

    # -- flush --------------------------------------------------------------------

    # The flusher compacts a source once it has this many parts (or parts clustered otherwise
    # than the source is now), at most once every `compact_interval` seconds.
    compact_min_parts = 8
    compact_interval = 0.0

    def _flush_loop(self) -> None:
        last_compaction = time.monotonic()
        while not self._stopping.wait(self.flush_interval):
            try:
                self.flush()
                if time.monotonic() - last_compaction >= self.compact_interval:
                    last_compaction = time.monotonic()
                    self.compact()
            except Exception:
                log.exception("flush or compaction failed; it will be retried")

    def flush(self) -> int:
        """Moves the applied batches the store lacks into Parquet, then trims the log;
        returns the store's version."""
        with self._flushing:
            with self._dataflow:
                stored = self.store.version
                # The tail may still hold flushed batches that a running lookup needs.
                batches = [b for b in self.tail.flushable(self.applied_epoch) if b.epoch > stored]
            if batches:
                with self._write_lock:
                    self.wal.rotate()
                self.store.flush(batches)
            return self._truncate_log()

    def _truncate_log(self) -> int:
        """Trims the log behind what is durable in Parquet and what no running upquery needs.

        The overlay reads the in-memory tail (`_fetch_from`): a running lookup needs every
        batch after the version of each snapshot it pinned (`_upquery_versions`), until it
        ends. The log on disk is read only at restart, from the store's version on; it is
        trimmed to the same bound, its segments whole.
        """
        with self._dataflow:
            durable = self.store.version
            bound = min(durable, min(self._upquery_versions, default=durable))
            assert all(bound <= v for v in self._upquery_versions), "the tail must outlive the pins"
            self.tail.trim_through(bound)
        self.wal.truncate_through(bound)
        return durable

    def compact(self) -> list[str]:
        """Compacts the store's sources that have `compact_min_parts` parts or more (Spark
        jobs, while writes and lookups go on); returns the sources compacted. Compaction
        keeps the content and version of the store: the log is not involved."""
        done = []
        for source in self.store.compaction_candidates(self.compact_min_parts):
            if self._stopping.is_set():
                break
            if self.store.compact(source):
                done.append(source)
        return done

    # -- introspection ------------------------------------------------------------

    def stats(self) -> Stats:
        with self._dataflow:
            readers = [
                ReaderInfo(view, key, c.reader.partial, c.reader.state.present_keys())
                for (view, key), c in self.circuits.items()
            ]
            dropped = sum(c.metrics.dropped for c in self.circuits.values())
            return Stats(
                applied_epoch=self.applied_epoch,
                durable_epoch=self.durable_epoch,
                flushed_epoch=self.store.version,
                upqueries=self.counters.upqueries,
                spark_jobs=self.counters.spark_jobs,
                dropped_deltas=dropped,
                readers=readers,
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

        The file is read and checked by Spark jobs outside every lock (`bulk_load`); a row
        that does not fit is refused with its `FILE:ROW` and reason, and nothing changes.
        Then, under the flusher's lock and the write lock, so that no flush or write
        interleaves: an empty marker record for the load's epoch E goes through the log (it
        settles every write submitted before, and keeps E from being reused whatever
        happens next, restart included); once the dataflow has applied every earlier batch,
        the log tail is flushed into the store, and the store writes the rows as one part of
        inserts at E and publishes it as version E, atomically (a crash before that leaves
        nothing). The marker never reaches the dataflow: a failure after it leaves E an
        empty epoch. Writes wait while this runs; lookups go on, at the epoch before E.

        The dataflow is brought up to date by dropping every circuit: operator state is a
        cache of the base relations, and the next lookup rebuilds and upqueries the store,
        which now holds the load. Feeding millions of rows through the circuits would
        cost more than refilling the keys that are read again. This is done, together with
        the applied and durable epochs moving to E, under the dataflow lock held across the
        store's publish, so no lookup ever answers with E's rows at an earlier epoch, or
        at E without them.
        """
        program = self._require_program()
        relation = program.relations.get(source)
        if relation is None or relation.kind != "source":
            known = ", ".join(sorted(program.checked.sources)) or "none"
            raise NotFound(f"no source named {source!r} (sources: {known})")
        schema = program.source_schema(source)
        try:
            spark = self._spark()
        except Exception as err:
            raise Unavailable(f"the load cannot start: Spark is unavailable ({err})") from err
        with bulk_load.LoadJob(spark, progress, cancelled) as job:  # type: ignore[arg-type]
            prepared = job.prepare(path, fmt, dict(options or {}), source, schema)
            if prepared.count == 0:
                return 0, self.durable_epoch
            # The flusher's lock first (it takes the write lock inside): no flush runs meanwhile.
            with self._flushing, self._write_lock:
                now = self.program
                if now is None or source not in now.checked.sources or now.source_schema(source) != schema:
                    raise FailedPrecondition(
                        f"the program changed during the load of {source!r}; nothing was loaded"
                    )
                epoch = max(self._last_assigned, self.durable_epoch) + 1
                try:
                    marker = self.wal.submit(LoggedBatch(epoch, {}))
                    self._last_assigned = epoch
                    marker.wait()
                except OSError as err:
                    raise Unavailable(f"the write-ahead log could not be written: {err}") from None
                with self._dataflow:
                    while self.applied_epoch < self.durable_epoch:
                        if self._stopping.is_set():
                            raise Unavailable("the server is stopping; nothing was loaded")
                        self._dataflow.wait(timeout=0.5)
                    pending = self.tail.flushable(self.applied_epoch)
                self.wal.rotate()
                with job.failures(path):
                    # The store's epochs stay contiguous: the log's batches go in below the load.
                    self.store.flush([b for b in pending if b.epoch > self.store.version])

                    @contextlib.contextmanager
                    def publishing() -> Iterator[None]:
                        with self._dataflow:
                            yield  # the store publishes version `epoch` here
                            self.tail.trim_through(epoch)
                            self.circuits.clear()
                            self.durable_epoch = self.applied_epoch = epoch
                            self._dataflow.notify_all()

                    with job.phase("writing", job.write_from, 1.0):
                        self.store.load(source, prepared.rows, epoch, publishing())
                self.wal.truncate_through(epoch)
        return prepared.count, epoch
