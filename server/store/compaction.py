"""Compaction of the source store: a source's parts rewritten as one part that holds each
tuple's latest operation, without the tuples it deletes (see `source_store`)."""

from __future__ import annotations

import threading
import uuid
from contextlib import AbstractContextManager
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType

from pomoview.server.spark.columns import column
from pomoview.server.store.fetch import StoreReads
from pomoview.server.store.layout import (
    PART_PREFIX,
    READ_OPTIONS,
    Part,
    Pin,
    Snapshot,
    SourceState,
)
from pomoview.server.store.manifest import StoreManifest
from pomoview.server.store.schema import part_file_struct
from pomoview.server.types import SourceSchema


class StoreCompaction(StoreManifest, StoreReads):
    """The compacting part of `SourceStore` (which defines the methods stubbed here)."""

    _rows_per_bucket: int
    _compact_lock: threading.Lock
    _flush_lock: threading.Lock
    _retired: set[tuple[str, str]]

    def pinned(self) -> AbstractContextManager[Pin]:
        raise NotImplementedError

    def _cluster_for(self, source: str, state: SourceState) -> tuple[str, ...]:
        raise NotImplementedError

    def _persisted(self, source: str, state: SourceState) -> tuple[str, ...] | None:
        raise NotImplementedError

    def _bucket_count(self, state: SourceState, rows: int | None) -> int:
        raise NotImplementedError

    def _collect_garbage(self) -> None:
        raise NotImplementedError

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
    ) -> Part | None:
        raise NotImplementedError

    def _publish_written(self, snapshot: Snapshot, what: str) -> None:
        raise NotImplementedError

    def compaction_candidates(self, min_parts: int) -> list[str]:
        """The sources with at least `min_parts` parts, or a part clustered otherwise than the
        source is now."""
        with self._lock:
            snapshot = self._snapshot
        return [
            name
            for name, state in snapshot.sources.items()
            if len(state.parts) >= min_parts
            or any(p.cluster != self._cluster_for(name, state) for p in state.parts)
        ]

    def compact(self, source: str) -> bool:
        """Rewrite the parts of `source` as one part holding each tuple's latest operation,
        without the tuples whose latest operation deletes them; return whether it did.

        A Spark job, run concurrently with flushes and fetches: it reads the parts of the
        current snapshot, and one manifest replacement swaps the new part in for them (parts
        flushed meanwhile stay after it). The old part folders are deleted once no pinned
        snapshot lists them. If this raises, the store is unchanged.
        """
        with self._compact_lock:
            with self.pinned() as pin:
                state = self._state(pin._snapshot, source)
                old = state.parts
                cluster = self._cluster_for(source, state)
                if not old or (len(old) == 1 and old[0].compacted and old[0].cluster == cluster):
                    return False
                rows = sum(
                    p.rows if p.rows is not None else state.buckets * self._rows_per_bucket for p in old
                )
                buckets = self._bucket_count(state, rows)
                spark = self._session()
                attrs = [column(a) for a, _ in state.schema]
                ops = (
                    spark.read.schema(part_file_struct(state.schema))
                    .options(**READ_OPTIONS)
                    .parquet(*(p for part in old for p in self._paths(source, part)))
                    .select(*attrs, column("_epoch"), column("_op"))
                )
                # Hash partitioning by the clustering columns is Spark's `pmod(hash(...), n)`:
                # Spark partition i is bucket i, and it satisfies the grouping by all attributes.
                ops = ops.repartition(buckets, *(column(c) for c in cluster)) if cluster else ops.coalesce(1)
                latest = (
                    ops.groupBy(*attrs)
                    .agg(F.max(F.struct(column("_epoch"), column("_op"))).alias("_latest"))
                    .where(F.col("_latest._op") == 1)
                    .select(
                        *attrs,
                        F.col("_latest._epoch").alias("_epoch"),
                        F.lit(1).cast(ByteType()).alias("_op"),
                    )
                )
                epochs = (old[0].epochs[0], old[-1].epochs[1])
                name = f"{PART_PREFIX}{epochs[0]:020d}-{epochs[1]:020d}-c{uuid.uuid4().hex[:8]}"
                part = self._write_part(
                    source,
                    name,
                    state.schema,
                    latest,
                    cluster=cluster,
                    buckets=buckets,
                    epochs=epochs,
                    rows=rows,
                    compacted=True,
                    kind="compact",
                    what=f"the compaction of {source!r}",
                )
            with self._flush_lock:
                current = self._current()
                now = self._state(current, source)
                # Only a compaction removes parts, and compactions run one at a time.
                assert now.parts[: len(old)] == old, "the parts changed under a compaction"
                sources = dict(current.sources)
                kept = now.parts[len(old) :]
                sources[source] = replace(
                    now,
                    parts=kept if part is None else (part, *kept),
                    cluster=self._persisted(source, now),
                )
                self._publish_written(
                    Snapshot(version=current.version, sources=sources), f"the compaction of {source!r}"
                )
                with self._lock:
                    self._retired.update((source, p.name) for p in old)
        self._collect_garbage()
        return True
