"""Writing a part: a DataFrame of operations, bucketed and sorted by Spark into a temporary
folder, its files renamed to the store's layout (`files`), then moved into place durably,
still unpublished until a manifest lists it (see `source_store`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, DataFrameWriter
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

from pomoview.server.spark.columns import column
from pomoview.server.spark.deadline import (
    WRITE_SETTING,
    SparkTimeout,
    SparkTimeouts,
    deadline,
    stall_for_tests,
)
from pomoview.server.store.files import flatten_bucket_dirs, flatten_partitions
from pomoview.server.store.fs import TMP_PREFIX, StoreFS
from pomoview.server.store.layout import BUCKET_COLUMN, BUCKET_DIR_COLUMN, ROW_GROUP_BYTES, Part, part_folder
from pomoview.server.store.manifest import StoreWriteError
from pomoview.server.types import SourceSchema

log = logging.getLogger("pomoview.store")


@dataclass(frozen=True)
class NewPart:
    """What a part to write is, but for its files: see `Part`. `rows` is an upper bound, or
    None if not known."""

    source: str
    name: str
    schema: SourceSchema
    cluster: tuple[str, ...]
    buckets: int
    epochs: tuple[int, int]
    rows: int | None
    compacted: bool = False
    inserts_only: bool = False


class PartWriter:
    """Writes parts into the store on `fs`, its Spark jobs under `timeouts.write`."""

    def __init__(self, fs: StoreFS, timeouts: SparkTimeouts) -> None:
        self._fs = fs
        self._timeouts = timeouts

    def write(
        self, new: NewPart, ops: DataFrame, *, kind: str, what: str, bucket_per_partition: bool = False
    ) -> Part | None:
        """Write `ops` (attributes, _epoch, _op; partitioned so that a bucket is in one Spark
        partition, for one file per bucket) as part `new.name`, bucketed by `new.cluster`,
        renamed into place durably but not published. None if `ops` is empty.

        With `bucket_per_partition` (Spark partition i holds bucket i only) each partition's file
        is written as it is, its bucket read from its name: no `partitionBy`, and no sort by a
        bucket column that is constant in every partition, which cost a load about 40%.

        Spark's jobs run under the write deadline (`kind` names the job for tests' stalls,
        `what` the operation in messages). If this raises, nothing it wrote is left behind
        (as far as deleting can do), and the error is `StoreWriteError` or `SparkTimeout`."""
        fs = self._fs
        folder = fs.join(fs.root, new.source)
        target = part_folder(fs, new.source, new.name)
        tmp = fs.join(folder, f"{TMP_PREFIX}{uuid.uuid4().hex}")
        bucket = _bucket_column(new)
        try:
            fs.makedirs(folder)
            if fs.exists(target):
                # Left by a crash before its manifest; never listed, never read.
                fs.delete_tree(target)
            with deadline(ops.sparkSession, self._timeouts.write, f"{what} ({new.source!r})", WRITE_SETTING):
                _sorted_writer(stall_for_tests(ops, kind), bucket, new, bucket_per_partition).option(
                    "parquet.block.size", str(ROW_GROUP_BYTES)
                ).parquet(fs.spark_path(tmp))
            if bucket_per_partition:
                files = flatten_partitions(fs, tmp, new.buckets)
            else:
                files = flatten_bucket_dirs(fs, tmp)
            if not files:
                fs.delete_tree(tmp)
                return None
            self._move_into_place(tmp, target, folder)
        except BaseException as err:
            self._discard_paths([tmp, target])
            if isinstance(err, (SparkTimeout, StoreWriteError)) or not isinstance(err, Exception):
                raise
            raise StoreWriteError(f"{what} ({new.source!r})", fs.describe(), err) from err
        return Part(
            new.name,
            new.cluster,
            new.buckets,
            files,
            new.epochs,
            new.rows,
            new.compacted,
            new.inserts_only or new.compacted,
        )

    def _move_into_place(self, tmp: str, target: str, folder: str) -> None:
        """Rename the written folder `tmp` to `target`, every file and folder fsynced first, and
        the rename itself after."""
        fs = self._fs
        fs.sync_tree(tmp)
        fs.rename(tmp, target)
        fs.sync_dir(folder)
        fs.sync_dir(fs.root)

    def discard(self, parts: Iterable[tuple[str, str]]) -> None:
        """Deletes unpublished parts (source, part name) of a write that failed (best effort:
        the next open deletes what is left)."""
        self._discard_paths([part_folder(self._fs, source, name) for source, name in parts])

    def _discard_paths(self, paths: Sequence[str]) -> None:
        """Deletes what a failed write left (best effort: the next open deletes the rest)."""
        for path in paths:
            try:
                if self._fs.exists(path):
                    self._fs.delete_tree(path)
            except Exception:  # noqa: BLE001
                log.warning("could not delete %s after a failed write", path, exc_info=True)


def _bucket_column(new: NewPart) -> Column:
    """A row's bucket: Spark's `pmod(hash(cluster columns), buckets)`, 0 if unclustered."""
    return (
        F.pmod(F.hash(*(column(c) for c in new.cluster)), F.lit(new.buckets)) if new.cluster else F.lit(0)
    ).cast(IntegerType())


def _sorted_writer(
    ops: DataFrame, bucket: Column, new: NewPart, bucket_per_partition: bool
) -> DataFrameWriter:
    """The writer of the part's files: `ops` with their `bucket`, sorted within each file by
    the clustering columns, then the other attributes, then the epoch."""
    attrs = [a for a, _ in new.schema]
    order = [*new.cluster, *(a for a in attrs if a not in new.cluster), "_epoch"]
    frame = ops.withColumn(BUCKET_COLUMN, bucket)
    if bucket_per_partition:
        return frame.sortWithinPartitions(*(column(c) for c in order)).write
    frame = frame.withColumn(BUCKET_DIR_COLUMN, column(BUCKET_COLUMN)).sortWithinPartitions(
        *(column(c) for c in (BUCKET_DIR_COLUMN, *order))
    )
    return frame.write.partitionBy(BUCKET_DIR_COLUMN)
