"""Base relations as Parquet operation logs, written and read by Spark (DESIGN §4).

Layout under the store's location (a local folder, or any URI Spark's Hadoop client can write:
see `fs`, which also says how the manifest is replaced atomically on each)::

    manifest.json       {"version": v, "sources": {name: {
                            "schema": [[attr, type], ...],
                            "cluster": [attr, ...] or null,  # null: none chosen yet
                            "buckets": B,                    # the most buckets a part may have
                            "parts": [part, ...],            # oldest first
                            "layout": {part: {"cluster": [attr, ...], "buckets": n,
                                              "files": [[bucket, file], ...], "epochs": [from, to],
                                              "rows": r or null, "compacted": bool,
                                              "inserts_only": bool}}}}}
    <source>/<part>/b<bucket>-<i>.parquet

(Through Hadoop the manifest is `manifest-<seq>.json`, a new file per replacement.)

A part holds one row per logged operation: the attributes, `_epoch`, `_op` (+1 insert, -1
delete) and `_bucket`. A flush writes one part per source, a bulk load one part at its epoch,
a compaction one part in place of all the parts it read; a part is named
`part-<from>-<to>-<f|l|c><id>` (the epochs it holds, what wrote it, a random id).

Clustering: each part is bucketed by the source's clustering columns, the columns upqueries
ask the source by: `_bucket = pmod(hash(cluster columns), n)` with Spark's Murmur3 `hash`, one
file per bucket, rows sorted by the clustering columns then the other attributes within it, in
small row groups (`layout.ROW_GROUP_BYTES`). The clustering is set with `cluster_by`, or learnt
from the first keyed fetch of the source (it defaults to the first attribute until then); it is
recorded per part, so parts written under different clusterings read correctly together, and
a compaction rewrites them all under the current one.

A keyed fetch computes the bucket of each key in Python (`bucket_hash` is Spark's function),
reads only those buckets' files, and filters them by the keys (an IN list, or an OR of ANDs for
keys of several columns), which Spark pushes into the Parquet reader: row-group min/max
statistics then skip the row groups that hold none of the keys. Beyond `sessions.PUSH_LIMIT`
keys (fewer for keys of several columns) the key filter is a broadcast semi-join instead, over
the same buckets' files.

The manifest is the only truth: a part is visible once the manifest that lists it has replaced
the old one atomically, and parts are immutable, so a reader that took a manifest snapshot sees
exactly the state at that snapshot's version. Folders the manifest does not list (a flush or a
compaction that crashed before its manifest, or parts a compaction replaced) are deleted at
open. While the store runs, a part a compaction replaced is deleted once the new manifest is
durable and no pinned snapshot (`pin`) lists it any more: a fetch pins its snapshot.

A tuple is present at version v iff its latest operation with epoch <= v is an insert. A
compaction reads every part of a source (a prefix of its history, through the store's version
v), keeps each tuple's latest operation, and drops the tuples whose latest operation is a
delete: no snapshot at v or later needs them, and older snapshots pin the parts they read.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, LongType

from pomoview.server.spark.columns import column
from pomoview.server.spark.deadline import SparkTimeouts
from pomoview.server.store.clustering import Clustering
from pomoview.server.store.compaction import Compactor
from pomoview.server.store.fetch import StoreReads
from pomoview.server.store.fs import LocalFS, StoreFS, StoreLocationError, open_store_fs
from pomoview.server.store.layout import (
    DEFAULT_BUCKETS,
    DEFAULT_ROWS_PER_BUCKET,
    Part,
    Pin,
    Snapshot,
    SourceState,
    new_part_name,
    part_folder,
)
from pomoview.server.store.manifest import Manifest
from pomoview.server.store.part_writer import NewPart, PartWriter
from pomoview.server.store.schema import (
    SchemaMismatch,
    check_schema,
    operations_arrow_schema,
    operations_struct,
    schema_difference,
)
from pomoview.server.store.sessions import ReadSessions
from pomoview.server.store.snapshots import Snapshots
from pomoview.server.types import LoggedBatch, SourceSchema, Tuple_, Value

__all__ = ["Pin", "SchemaMismatch", "SourceStore", "StagedLoad"]

@dataclass(frozen=True)
class StagedLoad:
    """A bulk load's part, written and durable but not published (`SourceStore.stage_load`)."""

    source: str
    epoch: int
    part: Part


class SourceStore:
    """The flushed base relations, with a version: the last epoch flushed.

    `spark` is called whenever Spark is needed and must return the shared session; opening a
    store reads only the manifest and does not need Spark. Manifest writers (`flush`, `load`,
    `ensure_source`, `cluster_by` and a compaction's publication) are serialized; `fetch`
    runs concurrently with all of them and answers from one pinned snapshot; `compact` runs
    concurrently with flushes (one compaction at a time). One store per root at a time:
    opening deletes the folders its manifest does not list, which would include another open
    store's flush in progress.

    `location` is a local folder (a path or a file:// URI), or any other URI, read and
    written through the Spark JVM's Hadoop client; `hadoop+URI` forces a URI through it (see
    `fs.open_store_fs`). A local store opens without Spark; a Hadoop one needs the session
    from the start. Opening raises `StoreLocationError` if the location cannot be used. A
    `StoreFS` given as `location` is used as it is (tests pass a power-cut layer).

    `buckets` is the most buckets a part of a source registered from now on may have;
    `rows_per_bucket` how many rows a part gets per bucket below that. `timeouts` are the
    deadlines of its Spark jobs (see `spark.deadline`): fetches have the read one, the jobs
    that write parts the write one.

    A flush, load or compaction that cannot write (a full disk, say) raises
    `StoreWriteError`, or `SparkTimeout` past its deadline, and leaves the store as it was:
    the parts it wrote are deleted at once, so that a retry on a full disk has the room the
    failed attempt took.

    The work is done by collaborators it composes: `Snapshots` (the current and pinned
    snapshots, published through the `Manifest`), `Clustering`, a `PartWriter`, `StoreReads`
    (fetches) and a `Compactor`.
    """

    def __init__(
        self,
        location: str | StoreFS,
        spark: Callable[[], SparkSession],
        *,
        buckets: int = DEFAULT_BUCKETS,
        rows_per_bucket: int = DEFAULT_ROWS_PER_BUCKET,
        timeouts: SparkTimeouts | None = None,
    ) -> None:
        if buckets < 1 or rows_per_bucket < 1:
            raise ValueError("buckets and rows_per_bucket must be at least 1")
        try:
            self._fs = open_store_fs(location, spark) if isinstance(location, str) else location
        except ValueError as err:
            raise StoreLocationError(str(err)) from None
        self._footer_rows: dict[str, int] = {}  # part name -> rows, for `rows_at_most`
        self._spark = spark
        self._buckets = buckets
        self._writing = threading.Lock()  # one manifest writer at a time
        timeouts = SparkTimeouts() if timeouts is None else timeouts
        manifest = Manifest(self._fs, buckets)
        self._snapshots = Snapshots(_open(self._fs, manifest), manifest, self._fs)
        self._clustering = Clustering(rows_per_bucket)
        self._writer = PartWriter(self._fs, timeouts)
        sessions = ReadSessions(spark)
        self._reads = StoreReads(self._fs, self._snapshots, self._clustering, sessions, timeouts)
        self._compactor = Compactor(
            self._fs, self._snapshots, self._clustering, self._writer, sessions.shared, self._writing
        )

    @property
    def version(self) -> int:
        """The last flushed epoch; 0 for an empty store."""
        return self._snapshots.current().version

    def schema(self, source: str) -> SourceSchema | None:
        """The stored schema of a source, or None if it is not registered."""
        state = self._snapshots.current().sources.get(source)
        return None if state is None else state.schema

    def rows_at_most(self, source: str) -> int | None:
        """At most how many rows `source` holds in the store (its parts' operations, deletes
        included), or None when it is not registered or a part's count is not known: a bulk
        load's part is counted from its Parquet footers, on a local store only. The log's
        unflushed batches are not counted."""
        state = self._snapshots.current().sources.get(source)
        if state is None:
            return None
        total = 0
        for part in state.parts:
            rows = part.rows if part.rows is not None else self._counted(source, part)
            if rows is None:
                return None
            total += rows
        return total

    def _counted(self, source: str, part: Part) -> int | None:
        """A part's rows from its files' footers (parts never change: counted once)."""
        if part.name not in self._footer_rows:
            if not isinstance(self._fs, LocalFS):
                return None
            folder = part_folder(self._fs, source, part.name)
            self._footer_rows[part.name] = sum(
                pq.read_metadata(self._fs.join(folder, name)).num_rows for _, name in part.files
            )
        return self._footer_rows[part.name]

    def schemas(self) -> dict[str, SourceSchema]:
        """Every registered source's schema, including sources no program declares any more."""
        return {name: state.schema for name, state in self._snapshots.current().sources.items()}

    def ensure_source(self, name: str, schema: SourceSchema) -> None:
        """Register a source with its schema; a no-op if it is registered with the same one.

        Raises `SchemaMismatch` if it is stored with another schema, ValueError for an
        unknown type name or a reserved/duplicate attribute name.
        """
        schema = tuple((str(a), str(t)) for a, t in schema)
        check_schema(name, schema)
        with self._writing:
            current = self._snapshots.current()
            stored = current.sources.get(name)
            if stored is not None:
                if stored.schema != schema:
                    raise SchemaMismatch(schema_difference(name, stored.schema, schema))
                return
            sources = dict(current.sources)
            sources[name] = SourceState(schema=schema, parts=(), buckets=self._buckets)
            self._snapshots.publish(Snapshot(version=current.version, sources=sources))

    # --- clustering ---------------------------------------------------------------------------

    def cluster_by(self, source: str, columns: Sequence[str]) -> None:
        """Cluster `source` by `columns` from now on: parts written later are bucketed and
        sorted by them, and the next compaction rewrites the older parts so. Durable."""
        columns = tuple(columns)
        with self._writing:
            current = self._snapshots.current()
            state = current.state(source)
            names = [a for a, _ in state.schema]
            if not columns or len(set(columns)) != len(columns):
                raise ValueError(f"cannot cluster {source!r} by {columns!r}")
            for c in columns:
                if c not in names:
                    raise KeyError(f"source {source!r} has no attribute {c!r}")
            if state.cluster == columns:
                return
            sources = dict(current.sources)
            sources[source] = replace(state, cluster=columns)
            self._snapshots.publish(Snapshot(version=current.version, sources=sources))

    def clustering(self, source: str) -> tuple[str, ...]:
        """The columns `source` is clustered by for what is written now."""
        return self._clustering.columns(source, self._snapshots.current().state(source))

    # --- pins and reads -------------------------------------------------------------------------

    def pin(self) -> Pin:
        """Pin the current snapshot: its files stay until `unpin`. Fetch at it with `at=`."""
        return self._snapshots.pin()

    def unpin(self, pin: Pin) -> None:
        """Release `pin`; the parts only it still listed are deleted."""
        self._snapshots.unpin(pin)

    def pinned(self) -> AbstractContextManager[Pin]:
        """`pin`, then `unpin` on leaving."""
        return self._snapshots.pinned()

    def fetch(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None = None,
        *,
        at: Pin | None = None,
    ) -> tuple[int, list[Tuple_]]:
        """The tuples of `source` present at the snapshot `at` (default: the current one, pinned
        for the call) whose `columns` are in `keys` and whose attributes equal `filters`.

        Returns (version, tuples), tuples in declared attribute order, in no particular order.
        `columns == ()` with `keys == {()}` is a full scan (of what `filters` selects). Runs
        one Spark job (none if the answer is empty without reading). Raises KeyError for an
        unknown source or attribute and ValueError for a key of the wrong length.
        """
        return self._reads.fetch(source, columns, keys, filters, at=at)

    def fetch_columns(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None = None,
        *,
        at: Pin,
    ) -> tuple[int, pa.Table | list[Tuple_]]:
        """`fetch`, answering with an Arrow table of the present tuples (columns `c0`, `c1`,
        ... in attribute order) where Arrow can decide presence, else with tuples. The table
        may repeat a tuple (see `presence.latest_columns`); the tuples never do."""
        return self._reads.fetch_columns(source, columns, keys, filters, at=at)

    def fetch_window(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None,
        order: Sequence[tuple[str, bool]],
        count: int,
        *,
        at: Pin,
    ) -> tuple[int, list[Tuple_]]:
        """`fetch` of each key's first `count` present tuples in `order`, (attribute,
        descending) pairs, most significant first: an ordered view's `ORDER BY ... LIMIT`
        pushed into the job, which finds the present tuples and numbers them within their key
        in Spark, so that at most `count` tuples of a key cross to Python.

        Returns (version, tuples), a key's tuples together and in `order`. Spark orders as
        Python's `sorted` does (a descending attribute reversed) for int, string (by code
        point) and bool attributes; other types are not promised. With an order that
        does not list every attribute, ties are cut arbitrarily: which of the tied tuples make
        the cut is not specified. Raises KeyError for an unknown source or attribute (of
        `columns`, `filters` or `order`), ValueError for a key of the wrong length or a
        `count` below 1."""
        return self._reads.fetch_window(source, columns, keys, filters, order, count, at=at)

    def fetch_frame(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None = None,
        *,
        at: Pin,
    ) -> DataFrame | None:
        """The DataFrame `fetch` collects at `at` (operations: attributes, _epoch, _op), or
        None if it would read nothing; keep `at` pinned while using it. Its `inputFiles()` are
        the files the fetch reads."""
        return self._reads.fetch_frame(source, columns, keys, filters, at=at)

    # --- writing ------------------------------------------------------------------------------

    def flush(self, batches: Sequence[LoggedBatch]) -> int:
        """Write the operations of `batches` as one new part per source touched; return the
        new version (the last batch's epoch).

        Epochs must exceed `version` and increase; every source named must be registered.
        An empty sequence is a no-op. If this raises, the store is unchanged (a half-written
        part is left unlisted and removed at the next open).
        """
        if not batches:
            return self.version
        with self._writing:
            current = self._snapshots.current()
            rows = _operations_by_source(current, batches)
            first, last = batches[0].epoch, batches[-1].epoch
            name = new_part_name((first, last), "f")
            sources = dict(current.sources)
            written: list[str] = []
            what = f"the flush of epochs {first}..{last}"
            try:
                for source, source_rows in rows.items():
                    if not source_rows:
                        continue
                    state = sources[source]
                    part = self._write_flushed(source, name, state, source_rows, (first, last), what)
                    if part is not None:
                        written.append(source)
                        cluster = self._clustering.persisted(source, state)
                        sources[source] = replace(state, parts=(*state.parts, part), cluster=cluster)
            except BaseException:
                self._writer.discard((source, name) for source in written)
                raise
            self._snapshots.publish_written(Snapshot(version=last, sources=sources), what)
            return last

    def _write_flushed(
        self,
        source: str,
        name: str,
        state: SourceState,
        rows: pa.Table,
        epochs: tuple[int, int],
        what: str,
    ) -> Part | None:
        """A flush's part of `source`: its operations `rows` (attributes, _epoch, _op)."""
        ops = self._spark().createDataFrame(rows, schema=operations_struct(state.schema)).coalesce(1)
        cluster = self._clustering.columns(source, state)
        buckets = self._clustering.bucket_count(state, rows.num_rows)
        new = NewPart(source, name, state.schema, cluster, buckets, epochs, rows.num_rows)
        return self._writer.write(new, ops, kind="flush", what=what)

    def load(
        self,
        source: str,
        rows: DataFrame,
        epoch: int,
        publishing: AbstractContextManager[Any] | None = None,
    ) -> int:
        """Bulk import: write `rows` (the source's attributes, by name, typed as stored) as
        one new part of inserts at `epoch`, then publish it as version `epoch`: `stage_load`
        then `publish_load`, with no other manifest writer in between (an empty `rows`
        publishes the version with no part)."""
        with self._writing:
            staged = self._stage(source, rows, epoch)
            return self._publish_staged(source, epoch, staged, publishing)

    def stage_load(self, source: str, rows: DataFrame, epoch: int) -> StagedLoad | None:
        """The writing half of `load`: `rows` as one part of inserts at `epoch`, durable (files
        and folders fsynced) but not listed by the manifest, so invisible, and deleted at the
        next open if it is never published. None if `rows` is empty. Runs beside the other
        manifest writers; `publish_load` checks that `epoch` still follows the store's version.
        If this raises (`StoreWriteError`, `SparkTimeout`), nothing it wrote is left behind.

        The part is written from the DataFrame by Spark, like a flush part but without
        collecting rows to the driver: one file per bucket of the clustering columns, each
        sorted."""
        part = self._stage(source, rows, epoch)
        return None if part is None else StagedLoad(source, epoch, part)

    def publish_load(
        self, staged: StagedLoad, publishing: AbstractContextManager[Any] | None = None
    ) -> int:
        """Publishes a staged load's part as version `staged.epoch`, which must exceed
        `version`: flush the log up to it first. The manifest is replaced inside `publishing`
        (a context manager, if given), which the caller uses to update its own state at the
        same moment. If this raises before that, the store is unchanged and the part deleted."""
        with self._writing:
            return self._publish_staged(staged.source, staged.epoch, staged.part, publishing)

    def discard_load(self, staged: StagedLoad | None) -> None:
        """Deletes a staged load's part that will not be published (best effort: the next
        open deletes what is left)."""
        if staged is not None:
            self._writer.discard([(staged.source, staged.part.name)])

    def _stage(self, source: str, rows: DataFrame, epoch: int) -> Part | None:
        current = self._snapshots.current()
        if epoch <= current.version:
            raise ValueError(f"epoch {epoch} does not follow epoch {current.version} in the store")
        state = current.state(source)
        cluster = self._clustering.columns(source, state)
        buckets = state.buckets
        attrs = [column(a) for a, _ in state.schema]
        ops = rows.select(*attrs)
        # The constant columns after the shuffle: they would cost its rows a third more bytes.
        ops = ops.repartition(buckets, *(column(c) for c in cluster)) if cluster else ops.coalesce(1)
        ops = ops.select(
            *attrs,
            F.lit(epoch).cast(LongType()).alias("_epoch"),
            F.lit(1).cast(ByteType()).alias("_op"),
        )
        name = new_part_name((epoch, epoch), "l")
        return self._writer.write(
            NewPart(source, name, state.schema, cluster, buckets, (epoch, epoch), None, inserts_only=True),
            ops,
            kind="load",
            what=f"the load of {source!r} at epoch {epoch}",
            # Just repartitioned by the clustering columns, nothing between: partition i is
            # bucket i (Spark's hash partitioning is `pmod(hash(...), n)`, as the bucket is).
            bucket_per_partition=bool(cluster),
        )

    def _publish_staged(
        self,
        source: str,
        epoch: int,
        part: Part | None,
        publishing: AbstractContextManager[Any] | None,
    ) -> int:
        """`publish_load` under the manifest writers' lock."""
        try:
            current = self._snapshots.current()
            if epoch <= current.version:
                raise ValueError(f"epoch {epoch} does not follow epoch {current.version} in the store")
            state = current.state(source)
        except BaseException:
            if part is not None:
                self._writer.discard([(source, part.name)])
            raise
        sources = dict(current.sources)
        parts = state.parts if part is None else (*state.parts, part)
        sources[source] = replace(state, parts=parts, cluster=self._clustering.persisted(source, state))
        with publishing if publishing is not None else contextlib.nullcontext():
            self._snapshots.publish_written(
                Snapshot(version=epoch, sources=sources), f"the load of {source!r} at epoch {epoch}"
            )
        return epoch

    # --- compaction ---------------------------------------------------------------------------

    def compaction_candidates(self, min_parts: int) -> list[str]:
        """The sources with at least `min_parts` parts, or a part clustered otherwise than the
        source is now."""
        return self._compactor.candidates(min_parts)

    def compact(self, source: str) -> bool:
        """Rewrite the parts of `source` as one part holding each tuple's latest operation,
        without the tuples whose latest operation deletes them; return whether it did.

        A Spark job, run concurrently with flushes and fetches: it reads the parts of the
        current snapshot, and one manifest replacement swaps the new part in for them (parts
        flushed meanwhile stay after it). The old part folders are deleted once no pinned
        snapshot lists them. If this raises, the store is unchanged.
        """
        return self._compactor.compact(source)


def _open(fs: StoreFS, manifest: Manifest) -> Snapshot:
    """The snapshot the store's manifest lists, once the folders it does not list are deleted."""
    try:
        fs.makedirs(fs.root)
        snapshot = manifest.read()
        manifest.remove_strays(snapshot)
    except StoreLocationError:
        raise
    except Exception as err:
        raise StoreLocationError(
            f"cannot open the store at {fs.describe()}: {type(err).__name__}: {err}"
        ) from err
    return snapshot


def _operations_by_source(current: Snapshot, batches: Sequence[LoggedBatch]) -> dict[str, pa.Table]:
    """The operations of `batches` (attributes, _epoch, _op) by source, as Arrow tables in
    the types of its attributes. ValueError if the epochs do not increase from the version
    of `current`, KeyError if a source is not registered in it.

    Built a column at a time (Arrow converts each list in one call), not a row at a time:
    a flush runs beside reads, and Spark's row path verified every value in Python, holding
    the GIL for a quarter of the busy server's time."""
    previous = current.version
    for batch in batches:
        if batch.epoch <= previous:
            raise ValueError(f"epoch {batch.epoch} does not follow epoch {previous} in the store")
        previous = batch.epoch
    tuples: dict[str, list[Tuple_]] = {}
    epochs: dict[str, list[np.ndarray]] = {}
    ops: dict[str, list[np.ndarray]] = {}
    for batch in batches:
        for name, change in batch.changes.items():
            if name not in current.sources:
                raise KeyError(f"source {name!r} is not registered in the store")
            out = tuples.setdefault(name, [])
            out += change.inserts
            out += change.deletes
            count = len(change.inserts) + len(change.deletes)
            epochs.setdefault(name, []).append(np.full(count, batch.epoch, dtype=np.int64))
            ops.setdefault(name, []).append(
                np.repeat(np.array([1, -1], dtype=np.int8), [len(change.inserts), len(change.deletes)])
            )
    tables: dict[str, pa.Table] = {}
    for name, rows in tuples.items():
        schema = current.sources[name].schema
        arrow = operations_arrow_schema(schema)
        # A list per column: pa.array takes a list ~60 times faster than a tuple (zip's).
        arrays = [pa.array([row[i] for row in rows], type=arrow.field(i).type) for i in range(len(schema))]
        arrays += [pa.array(np.concatenate(epochs[name])), pa.array(np.concatenate(ops[name]))]
        tables[name] = pa.Table.from_arrays(arrays, schema=arrow)
    return tables
