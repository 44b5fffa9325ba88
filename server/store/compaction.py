"""Compaction of the source store: a source's parts rewritten as one part that holds each
tuple's latest operation, without the tuples it deletes (see `source_store`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType

from pomoview.server.spark.columns import column
from pomoview.server.store.clustering import Clustering
from pomoview.server.store.fs import StoreFS
from pomoview.server.store.layout import Part, Snapshot, SourceState, new_part_name, part_paths
from pomoview.server.store.part_writer import NewPart, PartWriter
from pomoview.server.store.sessions import read_part_files
from pomoview.server.store.snapshots import Snapshots


class Compactor:
    """Compacts the sources of `snapshots`, reading their parts from `fs` in the session
    `spark` returns and writing the new part with `writer`, bucketed as `clustering` says.
    `manifest_writers` is the store's lock that lets one manifest writer at a time publish."""

    def __init__(
        self,
        fs: StoreFS,
        snapshots: Snapshots,
        clustering: Clustering,
        writer: PartWriter,
        spark: Callable[[], SparkSession],
        manifest_writers: threading.Lock,
    ) -> None:
        self._fs = fs
        self._snapshots = snapshots
        self._clustering = clustering
        self._writer = writer
        self._spark = spark
        self._manifest_writers = manifest_writers
        self._lock = threading.Lock()  # one compaction at a time

    def candidates(self, min_parts: int) -> list[str]:
        """As `SourceStore.compaction_candidates`."""
        snapshot = self._snapshots.current()
        return [
            name
            for name, state in snapshot.sources.items()
            if len(state.parts) >= min_parts
            or any(p.cluster != self._clustering.columns(name, state) for p in state.parts)
        ]

    def compact(self, source: str) -> bool:
        """As `SourceStore.compact`."""
        with self._lock:
            with self._snapshots.pinned() as pin:
                state = pin.snapshot.state(source)
                old = state.parts
                cluster = self._clustering.columns(source, state)
                if not old or (len(old) == 1 and old[0].compacted and old[0].cluster == cluster):
                    return False
                part = self._rewrite(source, state, cluster)
            self._swap_in(source, old, part)
        self._snapshots.collect_garbage()
        return True

    def _rewrite(self, source: str, state: SourceState, cluster: tuple[str, ...]) -> Part | None:
        """Write the present tuples of `state`'s parts as one compacted part (None if none is)."""
        old = state.parts
        rows = self._clustering.estimated_rows(state)
        buckets = self._clustering.bucket_count(state, rows)
        paths = [p for part in old for p in part_paths(self._fs, source, part)]
        ops = read_part_files(self._spark(), state.schema, paths).select(
            *(column(a) for a, _ in state.schema), column("_epoch"), column("_op")
        )
        # Hash partitioning by the clustering columns is Spark's `pmod(hash(...), n)`:
        # Spark partition i is bucket i, and it satisfies the grouping by all attributes.
        ops = ops.repartition(buckets, *(column(c) for c in cluster)) if cluster else ops.coalesce(1)
        epochs = (old[0].epochs[0], old[-1].epochs[1])
        name = new_part_name(epochs, "c")
        new = NewPart(source, name, state.schema, cluster, buckets, epochs, rows, compacted=True)
        what = f"the compaction of {source!r}"
        return self._writer.write(new, _latest(ops, state), kind="compact", what=what)

    def _swap_in(self, source: str, old: tuple[Part, ...], part: Part | None) -> None:
        """Publish the current snapshot with `part` in place of the parts `old` it replaces,
        which are retired."""
        with self._manifest_writers:
            current = self._snapshots.current()
            now = current.state(source)
            # Only a compaction removes parts, and compactions run one at a time.
            assert now.parts[: len(old)] == old, "the parts changed under a compaction"
            sources = dict(current.sources)
            kept = now.parts[len(old) :]
            sources[source] = replace(
                now,
                parts=kept if part is None else (part, *kept),
                cluster=self._clustering.persisted(source, now),
            )
            self._snapshots.publish_written(
                Snapshot(version=current.version, sources=sources), f"the compaction of {source!r}"
            )
            self._snapshots.retire(source, (p.name for p in old))


def _latest(ops: DataFrame, state: SourceState) -> DataFrame:
    """Each tuple's latest operation in `ops`, as an insert at its epoch, where it inserts."""
    attrs = [column(a) for a, _ in state.schema]
    return (
        ops.groupBy(*attrs)
        .agg(F.max(F.struct(column("_epoch"), column("_op"))).alias("_latest"))
        .where(F.col("_latest._op") == 1)
        .select(
            *attrs,
            F.col("_latest._epoch").alias("_epoch"),
            F.lit(1).cast(ByteType()).alias("_op"),
        )
    )
