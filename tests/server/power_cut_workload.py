"""Write sequences for the power-cut tests, and the oracle that checks a restart after a cut.

Two sequences, everything through one `CrashFS`; concurrent writers each write batches
(w, i), 1 to 5 rows or 30 (a record of several 4 KiB sectors), pausing after each third until
the main thread starts the next flush or compaction, so that writes go on during each. A
writer's acknowledgement is marked in the trace when its write returns.

- `run_scheduler_sequence`: the real `Scheduler` (`files=` the layer): its write path
  (`Scheduler.write`), its flusher (`flush`, then `compact`) and the real `SourceStore`, Spark
  writing the Parquet. One flush, then a compaction of the part it wrote.
- `run_sequence`, no Spark: the real `WriteAheadLog` with epochs assigned and submitted under
  one lock (as `WritePath.write`), two flushes (or one) in `Flusher.flush`'s order (rotate
  the log, write the parts and publish the manifest, delete the log segments the manifest
  covers) and a compaction, on an `ArrowStore`: `SourceStore`'s publication protocol through
  the real `LocalFS` (temporary folder, `sync_tree`, rename into place, fsync of the source's
  folder and of the root, `write_manifest`, after a compaction `delete_tree` of the replaced
  parts), the Parquet written by pyarrow where Spark would write it, never fsynced, as
  Spark's local file system never fsyncs. Its manifests are `SourceStore`'s format.

The oracle (`check_restart`): reopen the real `SourceStore` and `WriteAheadLog.recover` on
the state a cut left, as `Scheduler._recover` does; what is visible is the store's rows (read
from the Parquet files its manifest lists, with pyarrow) and the logged batches after the
store's version. Every batch acknowledged before the cut must be visible, whole; every
visible epoch must hold exactly one submitted batch, whole, and no batch may show twice: no
lost acknowledged write, no half batch, nothing invented.
"""
from __future__ import annotations

import io
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pomoview.server.disk.fileio import FileIO
from pomoview.server.store.fs import LocalFS
from pomoview.server.store.source_store import SourceStore
from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_
from pomoview.server.wal.wal import WalCorruption, WriteAheadLog

from .crash_fs import CrashFS

SOURCE = "votes"
SCHEMA: SourceSchema = (("w", "int"), ("i", "int"), ("j", "int"), ("pad", "string"))
COLUMNS = ["w", "i", "j", "pad", "_epoch", "_op"]


def batch_rows(writer: int, i: int) -> tuple[Tuple_, ...]:
    """A batch of 1 to 5 rows, or one of 30 (a record of several 4 KiB sectors), its records
    of varied sizes so that sector boundaries fall everywhere in them."""
    if (writer, i) == (0, 2):
        return tuple((writer, i, j, "y" * 200) for j in range(30))
    count = 1 + (writer * 7 + i * 3) % 5
    pad = "x" * (40 + (writer + i) * 97 % 300)
    return tuple((writer, i, j, pad) for j in range(count))


class Store:
    """What the sequence needs of a store."""

    version: int

    def flush(self, batches: Sequence[LoggedBatch]) -> int:
        raise NotImplementedError

    def compact(self) -> bool:
        raise NotImplementedError


def _part_layout(
    files: list[list[Any]], epochs: tuple[int, int], rows: int, compacted: bool
) -> dict[str, Any]:
    return {
        "cluster": ["w"],
        "buckets": 1,
        "files": files,
        "epochs": list(epochs),
        "rows": rows,
        "compacted": compacted,
        "inserts_only": compacted,
    }


class ArrowStore(Store):
    """`SourceStore`'s publication protocol without Spark (module docstring)."""

    def __init__(self, root: Path, files: FileIO) -> None:
        self.root = str(root)
        self.files = files
        self.fs = LocalFS(root, files)
        self.fs.makedirs(self.root)
        self.version = 0
        self.parts: list[tuple[str, dict[str, Any]]] = []
        self._publish()  # registers the source, as `ensure_source` does

    def _publish(self) -> None:
        self.fs.write_manifest(
            {
                "version": self.version,
                "sources": {
                    SOURCE: {
                        "schema": [list(a) for a in SCHEMA],
                        "cluster": ["w"],
                        "buckets": 1,
                        "parts": [name for name, _ in self.parts],
                        "layout": dict(self.parts),
                    }
                },
            }
        )

    def _write_part(self, name: str, rows: list[tuple[Any, ...]]) -> None:
        """As `PartWriter.write`: Parquet into a temporary folder (by pyarrow here, by
        Spark there), then made durable and renamed into place, not yet published."""
        fs = self.fs
        folder = fs.join(self.root, SOURCE)
        fs.makedirs(folder)
        tmp = fs.join(folder, f".tmp-{uuid.uuid4().hex}")
        fs.makedirs(tmp)
        columns = list(zip(*rows, strict=True))
        table = pa.table(
            {
                "w": pa.array(columns[0], pa.int64()),
                "i": pa.array(columns[1], pa.int64()),
                "j": pa.array(columns[2], pa.int64()),
                "pad": pa.array(columns[3], pa.string()),
                "_epoch": pa.array(columns[4], pa.int64()),
                "_op": pa.array(columns[5], pa.int8()),
                "_bucket": pa.array([0] * len(rows), pa.int32()),
            }
        )
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        out = self.files.create(fs.join(tmp, "b00000-0.parquet"))
        out.write(buffer.getvalue())  # no fsync: Spark's local file system never does one
        out.close()
        fs.sync_tree(tmp)
        fs.rename(tmp, fs.join(folder, name))
        fs.sync_dir(folder)
        fs.sync_dir(self.root)

    def flush(self, batches: Sequence[LoggedBatch]) -> int:
        rows = [
            (*t, b.epoch, 1) for b in batches for c in b.changes.values() for t in c.inserts
        ]
        first, last = batches[0].epoch, batches[-1].epoch
        name = f"part-{first:020d}-{last:020d}-f{uuid.uuid4().hex[:8]}"
        self._write_part(name, rows)
        self.parts.append((name, _part_layout([[0, "b00000-0.parquet"]], (first, last), len(rows), False)))
        self.version = last
        self._publish()
        return last

    def compact(self) -> bool:
        old = list(self.parts)
        if not old or (len(old) == 1 and old[0][1]["compacted"]):
            return False
        rows = [
            tuple(r.values())
            for name, _ in old
            for r in pq.read_table(
                self.fs.join(self.root, SOURCE, name, "b00000-0.parquet"),
                columns=COLUMNS,
            ).to_pylist()
        ]
        epochs = (old[0][1]["epochs"][0], old[-1][1]["epochs"][1])
        name = f"part-{epochs[0]:020d}-{epochs[1]:020d}-c{uuid.uuid4().hex[:8]}"
        self._write_part(name, rows)
        self.parts = [(name, _part_layout([[0, "b00000-0.parquet"]], epochs, len(rows), True))]
        self._publish()
        for part, _ in old:  # as `Snapshots.collect_garbage`, once no pin lists them
            self.fs.delete_tree(self.fs.join(self.root, SOURCE, part))
        return True


# A batch is named by its writer and its index: (w, i).
Key = tuple[int, int]


@dataclass
class Run:
    """What a run of the sequence did: every batch submitted, by key."""

    submitted: dict[Key, frozenset[Tuple_]] = field(default_factory=dict)
    flushes: int = 0
    compactions: int = 0


class _Phases:
    """Writers pause after each third of their batches until the main thread lets the next
    third start (right before a flush or a compaction, so that writes overlap it)."""

    def __init__(self, writers: int, per_writer: int) -> None:
        assert per_writer >= 3, "three phases"
        self.writers, self.per_writer = writers, per_writer
        self.events = [threading.Event(), threading.Event()]
        self.acked = threading.Semaphore(0)
        self.errors: list[BaseException] = []

    def phase(self, i: int) -> int:
        return i * 3 // self.per_writer

    def before(self, i: int) -> None:
        if self.phase(i) > 0:
            self.events[self.phase(i) - 1].wait(timeout=120)

    def wait_acks(self, n: int) -> None:
        """Every batch of phase n is acknowledged."""
        for _ in range(self.writers * sum(1 for i in range(self.per_writer) if self.phase(i) == n)):
            assert self.acked.acquire(timeout=120), "a writer is stuck"
        assert not self.errors, self.errors

    def run(self, write: Callable[[int, int], None], main: Callable[[], None]) -> None:
        def writer(w: int) -> None:
            try:
                for i in range(self.per_writer):
                    self.before(i)
                    write(w, i)
                    self.acked.release()
            except BaseException as err:  # reported by the main thread
                self.errors.append(err)
                self.acked.release()

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(self.writers)]
        for t in threads:
            t.start()
        try:
            main()
        finally:
            for event in self.events:
                event.set()
            for t in threads:
                t.join()
        assert not self.errors, self.errors


def run_sequence(
    fs: CrashFS,
    data: Path,
    make_store: Callable[[Path, FileIO], Store],
    *,
    writers: int = 3,
    per_writer: int = 6,
    flushes: int = 2,
) -> Run:
    """The sequence of the module docstring, in `data` (under `fs.root`), on a log and a
    store of its own. `flushes` is 2, or 1: the compaction then rewrites one flushed part."""
    assert flushes in (1, 2)
    store = make_store(data / "store", fs)
    wal = WriteAheadLog(data / "wal", files=fs)
    wal.recover({SOURCE: SCHEMA})
    run = Run()
    lock = threading.Lock()
    durable: list[LoggedBatch] = []  # in log order, as the scheduler's tail
    last_epoch = [0]
    phases = _Phases(writers, per_writer)

    def write(w: int, i: int) -> None:
        rows = batch_rows(w, i)
        with lock:
            last_epoch[0] += 1
            run.submitted[(w, i)] = frozenset(rows)
            commit = wal.submit(LoggedBatch(last_epoch[0], {SOURCE: SourceChange(rows, ())}), durable.append)
        commit.wait()
        fs.note(("ack", (w, i)))

    def flush(phase: threading.Event) -> None:
        wal.rotate()
        with lock:
            todo = [b for b in durable if b.epoch > store.version]
        phase.set()  # chosen what to flush: the next writes go on meanwhile
        if todo:
            version = store.flush(todo)
            wal.truncate_through(version)
            run.flushes += 1

    def main() -> None:
        for n, phase in enumerate(phases.events):
            phases.wait_acks(n)
            if n < flushes:
                flush(phase)
            else:
                phase.set()
        run.compactions += store.compact()

    phases.run(write, main)
    wal.close()
    return run


PROGRAM = f"""
source {SOURCE}(w: int, i: int, j: int, pad: string).
view by_writer(w).
by_writer(w: W, i: I) :- {SOURCE}(w: W, i: I).
"""


def run_scheduler_sequence(
    fs: CrashFS, data: Path, spark: Any, *, writers: int = 3, per_writer: int = 6
) -> Run:
    """The sequence on the real `Scheduler` (its write path, flusher and store, Spark writing
    the Parquet): one flush while writes go on, then a compaction while writes go on."""
    from pomoview.server.scheduler.scheduler import Scheduler

    s = Scheduler(data, lambda: spark, flush_interval=3600, files=fs)
    s.compact_min_parts = 1  # compact the one flushed part
    s.start()
    run = Run()
    try:
        s.install(PROGRAM)
        phases = _Phases(writers, per_writer)

        def write(w: int, i: int) -> None:
            rows = batch_rows(w, i)
            run.submitted[(w, i)] = frozenset(rows)
            typed = [
                {a: (t, v) for (a, t), v in zip(SCHEMA, row, strict=True)} for row in rows
            ]
            s.write([(SOURCE, typed, [])])
            fs.note(("ack", (w, i)))

        def main() -> None:
            phases.wait_acks(0)
            deadline = time.monotonic() + 120
            while s.applied_epoch < s.durable_epoch and time.monotonic() < deadline:
                time.sleep(0.01)  # the flusher flushes what the dataflow applied
            phases.events[0].set()
            if s.flush() > 0:
                run.flushes += 1
            phases.wait_acks(1)
            phases.events[1].set()
            run.compactions += len(s.compact())

        phases.run(write, main)
    finally:
        s.stop()
    return run


def _no_spark() -> Any:
    raise AssertionError("opening a local store needs no Spark")


def check_restart(data: Path, acked: set[Key], run: Run) -> str | None:
    """What is wrong with the state in `data` after a cut (module docstring), or None."""
    try:
        store = SourceStore(str(data / "store"), _no_spark)
    except Exception as err:  # noqa: BLE001 (the failure is the finding)
        return f"the store does not open: {type(err).__name__}: {err}"
    try:
        batches = WriteAheadLog(data / "wal").recover(store.schemas())
    except (WalCorruption, OSError) as err:
        return f"the log does not recover: {type(err).__name__}: {err}"
    version = store.version
    visible: dict[int, set[Tuple_]] = defaultdict(set)
    state = store._snapshots.current().sources.get(SOURCE)
    for part in () if state is None else state.parts:
        for _bucket, name in part.files:
            try:
                table = pq.read_table(data / "store" / SOURCE / part.name / name, columns=COLUMNS)
            except Exception as err:  # noqa: BLE001
                return f"part {part.name}/{name} is unreadable: {type(err).__name__}: {err}"
            for row in table.to_pylist():
                if row["_op"] != 1 or row["_epoch"] > version:
                    return f"part {part.name} holds {row!r} (store version {version})"
                visible[row["_epoch"]].add((row["w"], row["i"], row["j"], row["pad"]))
    for b in batches:
        if b.epoch > version:
            visible[b.epoch].update(b.changes.get(SOURCE, SourceChange((), ())).inserts)
    seen: dict[Key, int] = {}
    for epoch, rows in sorted(visible.items()):
        keys = {(int(r[0]), int(r[1])) for r in rows}
        if len(keys) != 1:
            return f"epoch {epoch} mixes the rows of batches {sorted(keys)}"
        (key,) = keys
        expected = run.submitted.get(key)
        if expected is None:
            return f"batch {key} is visible (epoch {epoch}) but was never submitted"
        if rows != expected:
            return f"batch {key} is visible (epoch {epoch}) with {len(rows)} of its {len(expected)} rows"
        if key in seen:
            return f"batch {key} is visible twice, at epochs {seen[key]} and {epoch}"
        seen[key] = epoch
    lost = sorted(acked - set(seen))
    if lost:
        logged = [b.epoch for b in batches]
        return f"acknowledged batches {lost} are lost (store version {version}, log epochs {logged})"
    return None
