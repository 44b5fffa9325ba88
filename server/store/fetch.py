"""Keyed reads of the source store: `StoreReads.fetch` runs one Spark job over the files of
the keys' buckets at a pinned snapshot, with the key filter pushed into the Parquet reader
(see `source_store` for the layout), and hands the answer to Python as Arrow batches."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    LongType,
    StructField,
    StructType,
)

from pomoview.server.spark.columns import column, quoted
from pomoview.server.spark.deadline import READ_SETTING, SparkTimeouts, deadline, stall_for_tests
from pomoview.server.store.bucket_hash import bucket_of
from pomoview.server.store.fs import StoreFS
from pomoview.server.store.key_filter import keys_sql, sql_literal
from pomoview.server.store.layout import (
    LISTING_THRESHOLD,
    OR_LIMIT,
    PUSH_LIMIT,
    READ_OPTIONS,
    Part,
    Pin,
    Snapshot,
    SourceState,
)
from pomoview.server.store.presence import latest_columns, latest_of_table
from pomoview.server.store.schema import SPARK_TYPES, part_file_struct, to_spark
from pomoview.server.types import Tuple_, Value

# A keyed fetch reads a few thousand rows: whole-stage code generation compiles a new class
# for each fetch (its keys are literals in the generated code), which cost more than the
# scan itself (measured: two 93-key jobs at once 0.57 s with it, 0.46 s without; a 1-key
# job 0.17 -> 0.13 s). Expressions are still compiled where Spark finds it worth it.
_FETCH_CONF = {"spark.sql.codegen.wholeStage": "false"}


class StoreReads:
    """The reading half of `SourceStore` (which sets these attributes)."""

    _fs: StoreFS
    _root: str
    _spark: Callable[[], SparkSession]
    _lock: threading.Lock
    _pins: dict[Pin, None]
    _learned: dict[str, tuple[str, ...]]
    _configured: SparkSession | None
    _timeouts: SparkTimeouts
    _fetch_base: SparkSession | None = None  # the session `_fetch_spark` was made from
    _fetch_spark: SparkSession | None = None

    def pin(self) -> Pin:
        raise NotImplementedError

    def unpin(self, pin: Pin) -> None:
        raise NotImplementedError

    @staticmethod
    def _state(snapshot: Snapshot, source: str) -> SourceState:
        state = snapshot.sources.get(source)
        if state is None:
            raise KeyError(f"source {source!r} is not registered in the store")
        return state


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
        pin = self.pin() if at is None else at
        try:
            snapshot = self._pinned_snapshot(pin)
            frame = self._frame(snapshot, source, tuple(columns), keys, filters or {})
            if frame is None:
                return snapshot.version, []
            # Arrow batches, not Row objects: a hot key's answer (a few hundred thousand
            # operations) crosses from the JVM in a fraction of the time `collect` takes.
            table = self._collect(frame, source)
            return snapshot.version, latest_of_table(table, snapshot.sources[source].schema)
        finally:
            if at is None:
                self.unpin(pin)

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
        may repeat a tuple (see `latest_columns`); the tuples never do."""
        snapshot = self._pinned_snapshot(at)
        state = self._state(snapshot, source)
        schema = state.schema
        # Parts whose every row inserts need no stamps: the present tuples are their rows.
        # Spark converts rows to Arrow one at a time, so two columns fewer is most of the
        # cost of a hot key (247,000 votes: 0.43 -> ... s).
        bare = (
            bool(schema)
            and all(t != "float" for _, t in schema)
            and all(p.inserts_only for p in state.parts)
        )
        frame = self._frame(snapshot, source, tuple(columns), keys, filters or {}, stamps=not bare)
        if frame is None:
            return snapshot.version, []
        table = self._collect(frame, source)
        if bare:
            return snapshot.version, table.rename_columns([f"c{i}" for i in range(len(schema))])
        present = latest_columns(table, schema, dedupe=False)
        if present is None:
            return snapshot.version, latest_of_table(table, schema)
        return snapshot.version, present

    def _collect(self, frame: DataFrame, source: str) -> pa.Table:
        """The fetch's Spark job, under the read deadline."""
        with deadline(frame.sparkSession, self._timeouts.read, f"the fetch from {source!r}", READ_SETTING):
            return frame.toArrow()

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
        return self._frame(self._pinned_snapshot(at), source, tuple(columns), keys, filters or {})

    def _pinned_snapshot(self, pin: Pin) -> Snapshot:
        with self._lock:
            if pin not in self._pins:
                raise ValueError("fetch at a snapshot that is not pinned")
        return pin._snapshot

    def _frame(
        self,
        snapshot: Snapshot,
        source: str,
        columns: tuple[str, ...],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value],
        stamps: bool = True,
    ) -> DataFrame | None:
        """The operations of `source` a fetch reads (attributes, _epoch, _op); without
        `stamps`, the attributes alone."""
        state = self._state(snapshot, source)
        types = dict(state.schema)
        for c in (*columns, *filters):
            if c not in types:
                raise KeyError(f"source {source!r} has no attribute {c!r}")
        key_list = list(
            dict.fromkeys(
                tuple(to_spark(v, types[c]) for v, c in zip(k, columns, strict=True)) for k in keys
            )
        )
        fixed = {a: to_spark(v, types[a]) for a, v in filters.items()}
        if columns and state.cluster is None:
            with self._lock:
                self._learned.setdefault(source, columns)
        if not state.parts or not key_list:
            return None
        spark = self._fetch_session()
        many = len(key_list) > (PUSH_LIMIT if len(columns) == 1 else OR_LIMIT)
        position = {c: i for i, c in enumerate(columns)}
        # Parts bucketed alike, by columns the fetch fixes, are read together, bucket by bucket.
        # A compacted part is read alone: it holds one insert per present tuple, so its
        # `_epoch` and `_op` need not be read (any epoch of its own sorts before later parts').
        layouts: dict[tuple[tuple[tuple[str, ...], int] | None, int | None], list[Part]] = {}
        for part in state.parts:
            covered = bool(part.cluster) and all(c in position or c in fixed for c in part.cluster)
            layout = (part.cluster, part.buckets) if covered else None
            layouts.setdefault((layout, part.epochs[1] if part.compacted else None), []).append(part)
        frames = []
        for (layout, compacted_through), parts in layouts.items():
            condition: str | None = None
            if layout is None:
                paths = [p for part in parts for p in self._paths(source, part)]
                if columns and not many:
                    condition = keys_sql(columns, key_list, types)
            else:
                cluster, buckets = layout
                by_bucket: dict[int, list[tuple[Value, ...]]] = {}
                for key in key_list:
                    values = [key[position[c]] if c in position else fixed[c] for c in cluster]
                    by_bucket.setdefault(bucket_of(values, buckets), []).append(key)
                paths = [p for part in parts for p in self._paths(source, part, by_bucket)]
                if not many and columns:
                    # Each file holds one bucket, and only the keys' buckets are read, so the
                    # keys alone are the condition: a row of key k can only be in k's bucket
                    # (the fixed columns of the cluster are filtered on their own below).
                    # One IN list, not an OR of one per bucket: a smaller expression to plan
                    # and evaluate (measured: 0.57 -> 0.31 s for two 93-key jobs at once,
                    # with `_FETCH_CONF`).
                    condition = keys_sql(columns, key_list, types)
            if not paths:
                continue
            df = spark.read.schema(part_file_struct(state.schema)).options(**READ_OPTIONS).parquet(*paths)
            for a, v in fixed.items():
                df = df.where(F.expr(f"{quoted(a)} = {sql_literal(v, types[a])}"))
            if condition is not None:
                df = df.where(F.expr(condition))
            if compacted_through is None:
                stamp = [column("_epoch"), column("_op")]
            else:
                stamp = [
                    F.lit(compacted_through).cast(LongType()).alias("_epoch"),
                    F.lit(1).cast(ByteType()).alias("_op"),
                ]
            frames.append(df.select(*(column(a) for a, _ in state.schema), *(stamp if stamps else ())))
        if not frames:
            return None
        df = functools.reduce(DataFrame.unionAll, frames)
        if many:
            names = [f"_k{i}" for i in range(len(columns))]
            key_df = spark.createDataFrame(
                key_list,
                schema=StructType(
                    [
                        StructField(k, SPARK_TYPES[types[c]](), nullable=False)
                        for k, c in zip(names, columns, strict=True)
                    ]
                ),
            )
            condition_col = functools.reduce(
                Column.__and__, (df[c] == key_df[k] for k, c in zip(names, columns, strict=True))
            )
            df = df.join(F.broadcast(key_df), on=condition_col, how="left_semi")
        return stall_for_tests(df, "fetch")

    def _paths(self, source: str, part: Part, buckets: Collection[int] | None = None) -> list[str]:
        folder = self._fs.join(self._root, source, part.name)
        return [
            self._fs.spark_path(self._fs.join(folder, f))
            for b, f in part.files
            if buckets is None or b in buckets
        ]

    def _session(self) -> SparkSession:
        spark = self._spark()
        if self._configured is not spark:
            # Session settings the store's reads rely on (see `PUSH_LIMIT`, `LISTING_THRESHOLD`).
            spark.conf.set("spark.sql.parquet.pushdown.inFilterThreshold", str(PUSH_LIMIT))
            spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(LISTING_THRESHOLD))
            self._configured = spark
        return spark

    def _fetch_session(self) -> SparkSession:
        """A session of its own for keyed fetches (sharing the SparkContext), with
        `_FETCH_CONF`, so that flushes, loads and compactions keep Spark's defaults."""
        spark = self._session()
        with self._lock:
            if self._fetch_base is not spark:
                session = spark.newSession()
                for key, value in {
                    **_FETCH_CONF,
                    "spark.sql.parquet.pushdown.inFilterThreshold": str(PUSH_LIMIT),
                    "spark.sql.sources.parallelPartitionDiscovery.threshold": str(LISTING_THRESHOLD),
                }.items():
                    session.conf.set(key, value)
                self._fetch_base, self._fetch_spark = spark, session
            assert self._fetch_spark is not None
            return self._fetch_spark
