"""Base relations as Parquet operation logs, written and read by Spark (DESIGN §4).

Layout under the store's location (a local folder, or any URI Spark's Hadoop client can write:
see `store_fs`, which also says how the manifest is replaced atomically on each)::

    manifest.json       {"version": v, "sources": {name: {
                            "schema": [[attr, type], ...],
                            "cluster": [attr, ...] or null,  # null: none chosen yet
                            "buckets": B,                    # the most buckets a part may have
                            "parts": [part, ...],            # oldest first
                            "layout": {part: {"cluster": [attr, ...], "buckets": n,
                                              "files": [[bucket, file], ...], "epochs": [from, to],
                                              "rows": r or null, "compacted": bool}}}}}
    <source>/<part>/b<bucket>-<i>.parquet

(Through Hadoop the manifest is `manifest-<seq>.json`, a new file per replacement.)

A part holds one row per logged operation: the attributes, `_epoch`, `_op` (+1 insert, -1
delete) and `_bucket`. A flush writes one part per source (`part-<from>-<to>`, the epochs it
holds), a bulk load one part at its epoch, a compaction one part in place of all the parts
it read (`part-<from>-<to>-c<id>`).

Clustering: each part is bucketed by the source's clustering columns, the columns upqueries
ask the source by: `_bucket = pmod(hash(cluster columns), n)` with Spark's Murmur3 `hash`, one
file per bucket, rows sorted by the clustering columns then the other attributes within it, in
small row groups (`ROW_GROUP_BYTES`). The clustering is set with `cluster_by`, or learnt from
the first keyed fetch of the source (it defaults to the first attribute until then); it is
recorded per part, so parts written under different clusterings read correctly together, and
a compaction rewrites them all under the current one.

A keyed fetch computes the bucket of each key in Python (`_spark_hash` is Spark's function),
reads only those buckets' files, and filters with a predicate that Spark pushes into the
Parquet reader, `(_bucket = b AND key IN keys_b) OR ...`: row-group min/max statistics then
skip the row groups that hold none of the keys of their file's bucket. Beyond `PUSH_LIMIT`
keys (`OR_LIMIT` for keys of several columns) the key filter is a broadcast semi-join instead,
over the same buckets' files.

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
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    IntegerType,
    LongType,
)

from pomoview.server.spark.columns import column
from pomoview.server.spark.deadline import (
    WRITE_SETTING,
    SparkTimeout,
    SparkTimeouts,
    deadline,
    stall_for_tests,
)
from pomoview.server.store.compaction import StoreCompaction
from pomoview.server.store.files import flatten_bucket_dirs, flatten_partitions
from pomoview.server.store.fs import TMP_PREFIX, StoreFS, StoreLocationError, open_store_fs
from pomoview.server.store.layout import (
    BUCKET_COLUMN,
    BUCKET_DIR_COLUMN,
    DEFAULT_BUCKETS,
    DEFAULT_ROWS_PER_BUCKET,
    PART_PREFIX,
    ROW_GROUP_BYTES,
    Part,
    Pin,
    Snapshot,
    SourceState,
)
from pomoview.server.store.manifest import StoreWriteError
from pomoview.server.store.schema import (
    SchemaMismatch,
    check_schema,
    operations_struct,
    schema_difference,
    to_spark,
)
from pomoview.server.types import LoggedBatch, SourceSchema, Value

log = logging.getLogger("pomoview.store")


@dataclass(frozen=True)
class StagedLoad:
    """A bulk load's part, written and durable but not published (`SourceStore.stage_load`)."""

    source: str
    epoch: int
    part: Part


class SourceStore(StoreCompaction):
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
    `store_fs.open_store_fs`). A local store opens without Spark; a Hadoop one needs the
    session from the start. Opening raises `StoreLocationError` if the location cannot be
    used. A `StoreFS` given as `location` is used as it is (tests pass a power-cut layer).

    `buckets` is the most buckets a part of a source registered from now on may have;
    `rows_per_bucket` how many rows a part gets per bucket below that. `timeouts` are the
    deadlines of its Spark jobs (see `spark_deadline`): fetches have the read one, the jobs
    that write parts the write one.

    A flush, load or compaction that cannot write (a full disk, say) raises
    `StoreWriteError`, or `SparkTimeout` past its deadline, and leaves the store as it was:
    the parts it wrote are deleted at once, so that a retry on a full disk has the room the
    failed attempt took.
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
        self._root = self._fs.root
        self._spark = spark
        self._buckets = buckets
        self._rows_per_bucket = rows_per_bucket
        self._lock = threading.Lock()  # guards _snapshot, _pins, _retired, _learned
        self._flush_lock = threading.Lock()  # one manifest writer at a time
        self._compact_lock = threading.Lock()  # one compaction at a time
        self._pins: dict[Pin, None] = {}
        self._retired: set[tuple[str, str]] = set()  # (source, part) unlisted, maybe pinned
        self._learned: dict[str, tuple[str, ...]] = {}  # first keyed fetch's columns
        self._configured: SparkSession | None = None
        self._timeouts = SparkTimeouts() if timeouts is None else timeouts
        try:
            self._fs.makedirs(self._root)
            self._snapshot = self._read_manifest()
            self._remove_strays()
        except StoreLocationError:
            raise
        except Exception as err:
            raise StoreLocationError(
                f"cannot open the store at {self._fs.describe()}: {type(err).__name__}: {err}"
            ) from err

    @property
    def version(self) -> int:
        """The last flushed epoch; 0 for an empty store."""
        with self._lock:
            return self._snapshot.version

    def schema(self, source: str) -> SourceSchema | None:
        """The stored schema of a source, or None if it is not registered."""
        with self._lock:
            state = self._snapshot.sources.get(source)
        return None if state is None else state.schema

    def schemas(self) -> dict[str, SourceSchema]:
        """Every registered source's schema, including sources no program declares any more."""
        with self._lock:
            return {name: state.schema for name, state in self._snapshot.sources.items()}

    def ensure_source(self, name: str, schema: SourceSchema) -> None:
        """Register a source with its schema; a no-op if it is registered with the same one.

        Raises `SchemaMismatch` if it is stored with another schema, ValueError for an
        unknown type name or a reserved/duplicate attribute name.
        """
        schema = tuple((str(a), str(t)) for a, t in schema)
        check_schema(name, schema)
        with self._flush_lock:
            current = self._current()
            stored = current.sources.get(name)
            if stored is not None:
                if stored.schema != schema:
                    raise SchemaMismatch(schema_difference(name, stored.schema, schema))
                return
            sources = dict(current.sources)
            sources[name] = SourceState(schema=schema, parts=(), buckets=self._buckets)
            self._publish(Snapshot(version=current.version, sources=sources))

    # --- clustering ---------------------------------------------------------------------------

    def cluster_by(self, source: str, columns: Sequence[str]) -> None:
        """Cluster `source` by `columns` from now on: parts written later are bucketed and
        sorted by them, and the next compaction rewrites the older parts so. Durable."""
        columns = tuple(columns)
        with self._flush_lock:
            current = self._current()
            state = self._state(current, source)
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
            self._publish(Snapshot(version=current.version, sources=sources))

    def clustering(self, source: str) -> tuple[str, ...]:
        """The columns `source` is clustered by for what is written now."""
        with self._lock:
            state = self._state(self._snapshot, source)
        return self._cluster_for(source, state)

    def _cluster_for(self, source: str, state: SourceState) -> tuple[str, ...]:
        if state.cluster is not None:
            return state.cluster
        with self._lock:
            learned = self._learned.get(source)
        if learned is not None:
            return learned
        return (state.schema[0][0],) if state.schema else ()

    def _persisted(self, source: str, state: SourceState) -> tuple[str, ...] | None:
        """What the manifest should record as the clustering of `source`: a learnt one sticks."""
        if state.cluster is not None:
            return state.cluster
        with self._lock:
            return self._learned.get(source)

    def _bucket_count(self, state: SourceState, rows: int | None) -> int:
        if rows is None:
            return state.buckets
        return max(1, min(state.buckets, -(-rows // self._rows_per_bucket)))

    # --- pins -----------------------------------------------------------------------------------

    def pin(self) -> Pin:
        """Pin the current snapshot: its files stay until `unpin`. Fetch at it with `at=`."""
        with self._lock:
            pin = Pin(self._snapshot)
            self._pins[pin] = None
            return pin

    def unpin(self, pin: Pin) -> None:
        """Release `pin`; the parts only it still listed are deleted."""
        with self._lock:
            if pin not in self._pins:
                raise ValueError("this snapshot is not pinned")
            del self._pins[pin]
        self._collect_garbage()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[Pin]:
        pin = self.pin()
        try:
            yield pin
        finally:
            self.unpin(pin)

    def _collect_garbage(self) -> None:
        with self._lock:
            if not self._retired:
                return
            live = {
                (name, part.name)
                for snapshot in (self._snapshot, *(p._snapshot for p in self._pins))
                for name, state in snapshot.sources.items()
                for part in state.parts
            }
            dead = self._retired - live
            self._retired -= dead
        for source, name in sorted(dead):
            try:
                self._fs.delete_tree(self._fs.join(self._root, source, name))
            except Exception:  # noqa: BLE001 (unlisted: the next open deletes it)
                log.warning("could not delete the replaced part %s/%s", source, name, exc_info=True)

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
        with self._flush_lock:
            current = self._current()
            previous = current.version
            for batch in batches:
                if batch.epoch <= previous:
                    raise ValueError(
                        f"epoch {batch.epoch} does not follow epoch {previous} in the store"
                    )
                previous = batch.epoch
            rows: dict[str, list[tuple[Value, ...]]] = {}
            for batch in batches:
                for name, change in batch.changes.items():
                    state = current.sources.get(name)
                    if state is None:
                        raise KeyError(f"source {name!r} is not registered in the store")
                    types = [t for _, t in state.schema]
                    out = rows.setdefault(name, [])
                    for op, tuples in ((1, change.inserts), (-1, change.deletes)):
                        for t in tuples:
                            values = tuple(to_spark(v, ty) for v, ty in zip(t, types, strict=True))
                            out.append((*values, batch.epoch, op))
            first, last = batches[0].epoch, batches[-1].epoch
            # Unique, as a compaction's: a retry after a publish whose outcome is unknown (the
            # manifest may be on disk, the fsync after it failed) must not reuse, and so first
            # delete, a folder that manifest may list.
            name = f"{PART_PREFIX}{first:020d}-{last:020d}-f{uuid.uuid4().hex[:8]}"
            sources = dict(current.sources)
            written: list[str] = []
            what = f"the flush of epochs {first}..{last}"
            try:
                for source, source_rows in rows.items():
                    if not source_rows:
                        continue
                    state = sources[source]
                    spark = self._spark()
                    ops = spark.createDataFrame(
                        source_rows, schema=operations_struct(state.schema)
                    ).coalesce(1)
                    part = self._write_part(
                        source,
                        name,
                        state.schema,
                        ops,
                        cluster=self._cluster_for(source, state),
                        buckets=self._bucket_count(state, len(source_rows)),
                        epochs=(first, last),
                        rows=len(source_rows),
                        compacted=False,
                        kind="flush",
                        what=what,
                    )
                    if part is not None:
                        written.append(source)
                        sources[source] = replace(
                            state, parts=(*state.parts, part), cluster=self._persisted(source, state)
                        )
            except BaseException:
                self._discard_parts((source, name) for source in written)
                raise
            self._publish_written(Snapshot(version=last, sources=sources), what)
            return last

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
        with self._flush_lock:
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
        with self._flush_lock:
            return self._publish_staged(staged.source, staged.epoch, staged.part, publishing)

    def discard_load(self, staged: StagedLoad | None) -> None:
        """Deletes a staged load's part that will not be published (best effort: the next
        open deletes what is left)."""
        if staged is not None:
            self._discard_parts([(staged.source, staged.part.name)])

    def _stage(self, source: str, rows: DataFrame, epoch: int) -> Part | None:
        current = self._current()
        if epoch <= current.version:
            raise ValueError(f"epoch {epoch} does not follow epoch {current.version} in the store")
        state = self._state(current, source)
        cluster = self._cluster_for(source, state)
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
        return self._write_part(
            source,
            f"{PART_PREFIX}{epoch:020d}-{epoch:020d}-l{uuid.uuid4().hex[:8]}",
            state.schema,
            ops,
            cluster=cluster,
            buckets=buckets,
            epochs=(epoch, epoch),
            rows=None,
            compacted=False,
            inserts_only=True,
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
            current = self._current()
            if epoch <= current.version:
                raise ValueError(f"epoch {epoch} does not follow epoch {current.version} in the store")
            state = self._state(current, source)
        except BaseException:
            if part is not None:
                self._discard_parts([(source, part.name)])
            raise
        sources = dict(current.sources)
        parts = state.parts if part is None else (*state.parts, part)
        sources[source] = replace(state, parts=parts, cluster=self._persisted(source, state))
        with publishing if publishing is not None else contextlib.nullcontext():
            self._publish_written(
                Snapshot(version=epoch, sources=sources), f"the load of {source!r} at epoch {epoch}"
            )
        return epoch

    def _write_part(
        self,
        source: str,
        name: str,
        schema: SourceSchema,
        ops: DataFrame,
        *,
        cluster: tuple[str, ...],
        buckets: int,
        epochs: tuple[int, int],
        rows: int | None,
        compacted: bool,
        inserts_only: bool = False,
        kind: str,
        what: str,
        bucket_per_partition: bool = False,
    ) -> Part | None:
        """Write `ops` (attributes, _epoch, _op; partitioned so that a bucket is in one Spark
        partition, for one file per bucket) as part `name`, bucketed by `cluster`, renamed into
        place durably but not published. None if `ops` is empty.

        With `bucket_per_partition` (Spark partition i holds bucket i only) each partition's file
        is written as it is, its bucket read from its name: no `partitionBy`, and no sort by a
        bucket column that is constant in every partition, which cost a load about 40%.

        Spark's jobs run under the write deadline (`kind` names the job for tests' stalls,
        `what` the operation in messages). If this raises, nothing it wrote is left behind
        (as far as deleting can do), and the error is `StoreWriteError` or `SparkTimeout`."""
        fs = self._fs
        folder = fs.join(self._root, source)
        target = fs.join(folder, name)
        tmp = fs.join(folder, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        attrs = [a for a, _ in schema]
        bucket = (
            F.pmod(F.hash(*(column(c) for c in cluster)), F.lit(buckets)) if cluster else F.lit(0)
        ).cast(IntegerType())
        order = [BUCKET_DIR_COLUMN, *cluster, *(a for a in attrs if a not in cluster), "_epoch"]
        try:
            fs.makedirs(folder)
            if fs.exists(target):
                # Left by a crash before its manifest; never listed, never read.
                fs.delete_tree(target)
            with deadline(ops.sparkSession, self._timeouts.write, f"{what} ({source!r})", WRITE_SETTING):
                frame = stall_for_tests(ops, kind).withColumn(BUCKET_COLUMN, bucket)
                if bucket_per_partition:
                    writer = frame.sortWithinPartitions(*(column(c) for c in order[1:])).write
                else:
                    frame = frame.withColumn(BUCKET_DIR_COLUMN, column(BUCKET_COLUMN)).sortWithinPartitions(
                        *(column(c) for c in order)
                    )
                    writer = frame.write.partitionBy(BUCKET_DIR_COLUMN)
                writer.option("parquet.block.size", str(ROW_GROUP_BYTES)).parquet(fs.spark_path(tmp))
            if bucket_per_partition:
                files = flatten_partitions(fs, tmp, buckets)
            else:
                files = flatten_bucket_dirs(fs, tmp)
            if not files:
                fs.delete_tree(tmp)
                return None
            fs.sync_tree(tmp)
            fs.rename(tmp, target)
            fs.sync_dir(folder)
            fs.sync_dir(self._root)
        except BaseException as err:
            self._discard_paths([tmp, target])
            if isinstance(err, (SparkTimeout, StoreWriteError)) or not isinstance(err, Exception):
                raise
            raise StoreWriteError(f"{what} ({source!r})", fs.describe(), err) from err
        return Part(name, cluster, buckets, files, epochs, rows, compacted, inserts_only or compacted)

    def _discard_paths(self, paths: Sequence[str]) -> None:
        """Deletes what a failed write left (best effort: the next open deletes the rest)."""
        for path in paths:
            try:
                if self._fs.exists(path):
                    self._fs.delete_tree(path)
            except Exception:  # noqa: BLE001
                log.warning("could not delete %s after a failed write", path, exc_info=True)

    def _discard_parts(self, parts: Iterable[tuple[str, str]]) -> None:
        """Deletes unpublished parts (source, part name) of a write that failed."""
        self._discard_paths([self._fs.join(self._root, source, name) for source, name in parts])

    def _publish_written(self, snapshot: Snapshot, what: str) -> None:
        """`_publish` for a write's new parts. A failure is `StoreWriteError`, and the parts
        stay: the new manifest may be on disk although the call failed (its folder's fsync,
        say); if it is not, they are unlisted, and the next open deletes them."""
        try:
            self._publish(snapshot)
        except OSError as err:
            raise StoreWriteError(f"{what} (its manifest)", self._fs.describe(), err) from err
