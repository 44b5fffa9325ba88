"""A write sequence for the power-cut tests, and the oracle that checks a restart after a cut.

The sequence: concurrent writers append batches to a real `WriteAheadLog` (epochs assigned
and submitted under one lock, as `WritePath.write` does; a writer's acknowledgement is marked
in the trace when its `Commit.wait` returns), while the main thread flushes twice (or once)
and compacts once, writes going on meanwhile. A flush runs in `Flusher.flush`'s order: rotate
the log, write the parts and publish the manifest, then delete the log segments the manifest
now covers. Everything goes through one `CrashFS`.

The store is either the real `SourceStore` (Spark writes the Parquet) or `ArrowStore`, which
needs no Spark: it runs `SourceStore`'s publication protocol through the real `LocalFS`
(temporary folder, `sync_tree`, rename into place, fsync of the source's folder and of the
root, `write_manifest`, and after a compaction `delete_tree` of the replaced parts), writing
the Parquet file with pyarrow where Spark would, never fsynced, as Spark's local file system
never fsyncs. Its manifests are `SourceStore`'s format, so a restart opens them with the
real `SourceStore`.

The oracle (`check_restart`): reopen the real `SourceStore` and `WriteAheadLog.recover` on
the state a cut left, as `Scheduler._recover` does; what is visible is the store's rows (read
from the Parquet files its manifest lists, with pyarrow) and the logged batches after the
store's version. Every batch acknowledged before the cut must be visible whole, and every
visible batch must be one that was submitted, whole: no lost acknowledged write, no half
batch, nothing invented.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pomoview.server.fileio import FileIO
from pomoview.server.source_store import SourceStore
from pomoview.server.store_fs import LocalFS
from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_
from pomoview.server.wal import WalCorruption, WriteAheadLog

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


class RealStore(Store):
    """The real `SourceStore`, through the layer; Spark writes its Parquet files."""

    def __init__(self, root: Path, files: FileIO, spark: Callable[[], Any]) -> None:
        self.store = SourceStore(LocalFS(root, files), spark)
        self.store.ensure_source(SOURCE, SCHEMA)

    @property  # type: ignore[override]
    def version(self) -> int:
        return self.store.version

    def flush(self, batches: Sequence[LoggedBatch]) -> int:
        return self.store.flush(batches)

    def compact(self) -> bool:
        return self.store.compact(SOURCE)


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
        """As `SourceStore._write_part`: Parquet into a temporary folder (by pyarrow here, by
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
        for part, _ in old:  # as `SourceStore._collect_garbage`, once no pin lists them
            self.fs.delete_tree(self.fs.join(self.root, SOURCE, part))
        return True


@dataclass
class Run:
    """What a run of the sequence did: every batch submitted, by epoch."""

    submitted: dict[int, frozenset[Tuple_]] = field(default_factory=dict)
    flushes: int = 0
    compactions: int = 0


def run_sequence(
    fs: CrashFS,
    data: Path,
    make_store: Callable[[Path, FileIO], Store],
    *,
    writers: int = 3,
    per_writer: int = 6,
    flushes: int = 2,
) -> Run:
    """`flushes` is 2, or 1 to save a Spark job: the compaction then rewrites one flushed part."""
    assert per_writer >= 3, "three phases"
    assert flushes in (1, 2)
    """The sequence of the module docstring, in `data` (under `fs.root`)."""
    store = make_store(data / "store", fs)
    wal = WriteAheadLog(data / "wal", files=fs)
    wal.recover({SOURCE: SCHEMA})
    run = Run()
    lock = threading.Lock()
    durable: list[LoggedBatch] = []  # in log order, as the scheduler's tail
    acked = threading.Semaphore(0)
    last_epoch = [0]
    errors: list[BaseException] = []

    # Writers pause after each third of their batches until the next flush has chosen what
    # it flushes, then write on while it runs: each flush has batches, and writes overlap it.
    phases = [threading.Event(), threading.Event()]

    def writer(w: int) -> None:
        try:
            for i in range(per_writer):
                if i * 3 // per_writer > 0:
                    phases[i * 3 // per_writer - 1].wait(timeout=60)
                rows = batch_rows(w, i)
                with lock:
                    last_epoch[0] += 1
                    epoch = last_epoch[0]
                    run.submitted[epoch] = frozenset(rows)
                    commit = wal.submit(
                        LoggedBatch(epoch, {SOURCE: SourceChange(rows, ())}), durable.append
                    )
                commit.wait()
                fs.note(("ack", epoch))
                acked.release()
        except BaseException as err:  # reported by the main thread
            errors.append(err)
            acked.release()

    def flush(phase: threading.Event) -> None:
        wal.rotate()
        with lock:
            todo = [b for b in durable if b.epoch > store.version]
        phase.set()
        if todo:
            version = store.flush(todo)
            wal.truncate_through(version)
            run.flushes += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for n, phase in enumerate(phases):
        # Once every batch of phase n is acknowledged, flush and let phase n + 1 start.
        for _ in range(writers * sum(1 for i in range(per_writer) if i * 3 // per_writer == n)):
            assert acked.acquire(timeout=60), "a writer is stuck"
        assert not errors, errors
        if n < flushes:
            flush(phase)
        else:
            phase.set()
    run.compactions += store.compact()
    for t in threads:
        t.join()
    wal.close()
    assert not errors, errors
    return run


def _no_spark() -> Any:
    raise AssertionError("opening a local store needs no Spark")


def check_restart(data: Path, acked: set[int], run: Run) -> str | None:
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
    state = store._current().sources.get(SOURCE)
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
            visible[b.epoch].update(b.changes[SOURCE].inserts)
    lost = sorted(acked - set(visible))
    if lost:
        logged = [b.epoch for b in batches]
        return f"acknowledged epochs {lost} are lost (store version {version}, log {logged})"
    for epoch, rows in sorted(visible.items()):
        expected = run.submitted.get(epoch)
        if expected is None:
            return f"epoch {epoch} is visible but was never submitted"
        if rows != expected:
            return f"epoch {epoch} is visible with {len(rows)} of its {len(expected)} rows"
    return None
