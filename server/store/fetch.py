"""Keyed reads of the source store (`SourceStore.fetch` and its variants): one Spark job over
the files of the keys' buckets at a pinned snapshot, with the key filter pushed into the
Parquet reader (see `source_store` for the layout), its answer handed to Python as Arrow
batches and reduced to the present tuples (`presence`). A windowed fetch (`fetch_window`)
reduces them in Spark instead, to each key's first tuples in an order."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, LongType, StructField, StructType

from pomoview.server.spark.columns import column
from pomoview.server.spark.deadline import READ_SETTING, SparkTimeouts, deadline, stall_for_tests
from pomoview.server.store.bucket_hash import bucket_of
from pomoview.server.store.clustering import Clustering
from pomoview.server.store.fs import StoreFS
from pomoview.server.store.key_filter import equals_sql, keys_sql
from pomoview.server.store.layout import Part, Pin, Snapshot, SourceState, part_paths
from pomoview.server.store.presence import latest_columns, latest_of_table
from pomoview.server.store.schema import SPARK_TYPES, to_spark
from pomoview.server.store.sessions import PUSH_LIMIT, ReadSessions, read_part_files
from pomoview.server.store.snapshots import Snapshots
from pomoview.server.types import SourceSchema, Tuple_, Value

# Up to this many keys of several columns, the key filter is an OR of ANDs pushed into the
# Parquet reader (as `PUSH_LIMIT` for one column); beyond, a broadcast semi-join.
_OR_LIMIT = 64

# Parts read together: those bucketed alike, by columns the fetch fixes, as (cluster, buckets),
# else None; and for a compacted part, the last epoch it holds, else None.
_Group = tuple[tuple[tuple[str, ...], int] | None, int | None]


@dataclass(frozen=True)
class _Request:
    """A fetch's question about `source`, its values in the Spark types of its attributes:
    `keys` (distinct) of `columns`, and `fixed` values of other attributes."""

    source: str
    state: SourceState
    columns: tuple[str, ...]
    types: Mapping[str, str]
    keys: list[tuple[Value, ...]]
    fixed: Mapping[str, Value]

    @property
    def many(self) -> bool:
        """Too many keys to push into the Parquet reader: a semi-join filters them."""
        return len(self.keys) > (PUSH_LIMIT if len(self.columns) == 1 else _OR_LIMIT)


def _request(
    state: SourceState,
    source: str,
    columns: tuple[str, ...],
    keys: Collection[tuple[Value, ...]],
    filters: Mapping[str, Value],
) -> _Request:
    """The fetch of `keys` of `columns` and `filters` from `source` (at `state`), as a
    `_Request`. KeyError for an unknown attribute, ValueError for a key of the wrong length."""
    types = dict(state.schema)
    for c in (*columns, *filters):
        if c not in types:
            raise KeyError(f"source {source!r} has no attribute {c!r}")
    distinct = dict.fromkeys(
        tuple(to_spark(v, types[c]) for v, c in zip(k, columns, strict=True)) for k in keys
    )
    fixed = {a: to_spark(v, types[a]) for a, v in filters.items()}
    return _Request(source, state, columns, types, list(distinct), fixed)


class StoreReads:
    """Fetches from the parts on `fs` of the snapshots in `snapshots`. A keyed fetch of a
    source with no clustering chosen teaches `clustering` its columns; its Spark jobs run in
    `sessions`' fetch session, under `timeouts.read`."""

    def __init__(
        self,
        fs: StoreFS,
        snapshots: Snapshots,
        clustering: Clustering,
        sessions: ReadSessions,
        timeouts: SparkTimeouts,
    ) -> None:
        self._fs = fs
        self._snapshots = snapshots
        self._clustering = clustering
        self._sessions = sessions
        self._timeouts = timeouts

    def fetch(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None = None,
        *,
        at: Pin | None = None,
    ) -> tuple[int, list[Tuple_]]:
        """As `SourceStore.fetch`."""
        pin = self._snapshots.pin() if at is None else at
        try:
            snapshot = self._snapshots.pinned_snapshot(pin)
            frame = self.operations(snapshot, source, tuple(columns), keys, filters or {})
            if frame is None:
                return snapshot.version, []
            # Arrow batches, not Row objects: a hot key's answer (a few hundred thousand
            # operations) crosses from the JVM in a fraction of the time `collect` takes.
            table = self._collect(frame, source)
            return snapshot.version, latest_of_table(table, snapshot.sources[source].schema)
        finally:
            if at is None:
                self._snapshots.unpin(pin)

    def fetch_columns(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None = None,
        *,
        at: Pin,
    ) -> tuple[int, pa.Table | list[Tuple_]]:
        """As `SourceStore.fetch_columns`."""
        snapshot = self._snapshots.pinned_snapshot(at)
        state = snapshot.state(source)
        schema = state.schema
        # Parts whose every row inserts need no stamps: the present tuples are their rows.
        # Spark converts rows to Arrow one at a time, so two columns fewer is most of the
        # cost of a hot key (247,000 votes: 0.43 -> ... s).
        bare = (
            bool(schema)
            and all(t != "float" for _, t in schema)
            and all(p.inserts_only for p in state.parts)
        )
        frame = self.operations(snapshot, source, tuple(columns), keys, filters or {}, stamps=not bare)
        if frame is None:
            return snapshot.version, []
        table = self._collect(frame, source)
        if bare:
            return snapshot.version, table.rename_columns([f"c{i}" for i in range(len(schema))])
        present = latest_columns(table, schema, dedupe=False)
        if present is None:
            return snapshot.version, latest_of_table(table, schema)
        return snapshot.version, present

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
        """As `SourceStore.fetch_window`."""
        if count < 1:
            raise ValueError(f"a window of the fetch from {source!r} holds at least 1 tuple, not {count}")
        snapshot = self._snapshots.pinned_snapshot(at)
        state = snapshot.state(source)
        names = {a for a, _ in state.schema}
        for a, _ in order:
            if a not in names:
                raise KeyError(f"source {source!r} has no attribute {a!r} to order by")
        if not state.schema:
            # No attribute: a fetch answers the one tuple () or nothing; no window cuts it.
            return self.fetch(source, columns, keys, filters, at=at)
        # Parts whose every row inserts: their distinct rows are the present tuples.
        bare = all(p.inserts_only for p in state.parts)
        frame = self.operations(snapshot, source, tuple(columns), keys, filters or {}, stamps=not bare)
        if frame is None:
            return snapshot.version, []
        one = len(keys) == 1 or not columns  # a top-k, not a number per key
        first = _first_of_each_key(
            frame, state.schema, tuple(columns), order, count, stamped=not bare, one=one
        )
        table = self._collect(first, source)
        return snapshot.version, list(zip(*(c.to_pylist() for c in table.columns), strict=True))

    def fetch_frame(
        self,
        source: str,
        columns: Sequence[str],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value] | None = None,
        *,
        at: Pin,
    ) -> DataFrame | None:
        """As `SourceStore.fetch_frame`."""
        snapshot = self._snapshots.pinned_snapshot(at)
        return self.operations(snapshot, source, tuple(columns), keys, filters or {})

    def _collect(self, frame: DataFrame, source: str) -> pa.Table:
        """The fetch's Spark job, under the read deadline."""
        with deadline(frame.sparkSession, self._timeouts.read, f"the fetch from {source!r}", READ_SETTING):
            return frame.toArrow()

    def operations(
        self,
        snapshot: Snapshot,
        source: str,
        columns: tuple[str, ...],
        keys: Collection[tuple[Value, ...]],
        filters: Mapping[str, Value],
        stamps: bool = True,
    ) -> DataFrame | None:
        """The operations of `source` a fetch reads (attributes, _epoch, _op), or None if it
        would read nothing; without `stamps`, the attributes alone."""
        request = _request(snapshot.state(source), source, columns, keys, filters)
        if columns and request.state.cluster is None:
            self._clustering.learn(source, columns)
        if not request.state.parts or not request.keys:
            return None
        spark = self._sessions.fetch()
        # Each file holds one bucket, and only the keys' buckets are read, so the keys alone
        # are the condition: a row of key k can only be in k's bucket (the fixed columns of
        # the cluster are filtered on their own). One IN list, not an OR of one per bucket: a
        # smaller expression to plan and evaluate (measured: 0.57 -> 0.31 s for two 93-key
        # jobs at once, with the fetch session's settings).
        condition = keys_sql(columns, request.keys, request.types) if columns and not request.many else None
        frames = [
            self._group_frame(spark, request, group, parts, condition, stamps)
            for group, parts in _groups(request).items()
        ]
        present = [frame for frame in frames if frame is not None]
        if not present:
            return None
        df = functools.reduce(DataFrame.unionAll, present)
        if request.many:
            df = _semi_join(spark, df, request)
        return stall_for_tests(df, "fetch")

    def _group_frame(
        self,
        spark: SparkSession,
        request: _Request,
        group: _Group,
        parts: list[Part],
        condition: str | None,
        stamps: bool,
    ) -> DataFrame | None:
        """The operations a fetch reads from one group of parts (see `_groups`), or None if
        it reads none of their files."""
        layout, compacted_through = group
        if layout is None:
            paths = [p for part in parts for p in part_paths(self._fs, request.source, part)]
        else:
            buckets = _buckets_of_keys(request, *layout)
            paths = [p for part in parts for p in part_paths(self._fs, request.source, part, buckets)]
        if not paths:
            return None
        df = read_part_files(spark, request.state.schema, paths)
        for a, v in request.fixed.items():
            df = df.where(F.expr(equals_sql(a, v, request.types[a])))
        if condition is not None:
            df = df.where(F.expr(condition))
        if compacted_through is None:
            stamp = [column("_epoch"), column("_op")]
        else:
            stamp = [
                F.lit(compacted_through).cast(LongType()).alias("_epoch"),
                F.lit(1).cast(ByteType()).alias("_op"),
            ]
        return df.select(*(column(a) for a, _ in request.state.schema), *(stamp if stamps else ()))


def _groups(request: _Request) -> dict[_Group, list[Part]]:
    """The parts of the source, grouped as a fetch reads them. Parts bucketed alike, by
    columns the fetch fixes, are read together, bucket by bucket. A compacted part is read
    alone: it holds one insert per present tuple, so its `_epoch` and `_op` need not be read
    (any epoch of its own sorts before later parts')."""
    groups: dict[_Group, list[Part]] = {}
    for part in request.state.parts:
        covered = bool(part.cluster) and all(c in request.columns or c in request.fixed for c in part.cluster)
        layout = (part.cluster, part.buckets) if covered else None
        groups.setdefault((layout, part.epochs[1] if part.compacted else None), []).append(part)
    return groups


def _buckets_of_keys(request: _Request, cluster: tuple[str, ...], buckets: int) -> set[int]:
    """The buckets the keys hash to, in parts of `buckets` buckets clustered by `cluster`."""
    position = {c: i for i, c in enumerate(request.columns)}
    return {
        bucket_of([key[position[c]] if c in position else request.fixed[c] for c in cluster], buckets)
        for key in request.keys
    }


def _semi_join(spark: SparkSession, df: DataFrame, request: _Request) -> DataFrame:
    """The rows of `df` whose columns are one of the keys, by a broadcast semi-join."""
    names = [f"_k{i}" for i in range(len(request.columns))]
    fields = [
        StructField(k, SPARK_TYPES[request.types[c]](), nullable=False)
        for k, c in zip(names, request.columns, strict=True)
    ]
    key_df = spark.createDataFrame(request.keys, schema=StructType(fields))
    on = functools.reduce(
        Column.__and__, (df[c] == key_df[k] for k, c in zip(names, request.columns, strict=True))
    )
    return df.join(F.broadcast(key_df), on=on, how="left_semi")


def _first_of_each_key(
    df: DataFrame,
    schema: SourceSchema,
    columns: tuple[str, ...],
    order: Sequence[tuple[str, bool]],
    count: int,
    *,
    stamped: bool,
    one: bool,
) -> DataFrame:
    """The first `count` present tuples of each key of `columns` in `order`, from `df`: the
    operations of a fetch (attributes, _epoch, _op) if `stamped`, else its rows, every one an
    insert (repeats removed here), of `one` key or more. The attributes alone, a key's tuples
    together, in `order`.

    Present as in `presence.latest_columns`, and by the same number: a tuple's latest
    operation, the largest (_epoch, _op), an insert winning a tie, inserts it."""
    attrs = [column(a) for a, _ in schema]
    if columns:
        # One task, no shuffle: a keyed fetch reads its keys' buckets only, and a key's rows
        # would meet in one task anyway (the scan of many keys' buckets is one task too). A
        # shuffle by key cost a stage: 0.27 s instead of 0.21 s for a key of 14,000 rows on
        # local[2] (a plain fetch's job: 0.09 s); 0.16 s when one key's first tuples are a
        # top-k instead of numbered. Without a key column (a scan), presence shuffles, and the
        # cut is a top-k of each partition, merged.
        df = df.coalesce(1)
    if stamped:
        stamp = column("_epoch") * 4 + column("_op").cast(LongType()) + 1  # insert: 2 mod 4
        latest = F.max(stamp).alias("_op")  # no attribute may be called _op
        df = df.groupBy(*attrs).agg(latest).where(column("_op") % 4 == 2).select(*attrs)
    else:
        df = df.dropDuplicates()
    # A partial order's ties are cut by the other attributes (the caller may not rely on it):
    # numbering needs an order, and a total one makes the answer repeatable.
    listed = {a for a, _ in order}
    by = [column(a).desc() if descending else column(a).asc() for a, descending in order]
    by += [column(a).asc() for a, _ in schema if a not in listed]
    if one:
        return df.orderBy(*by).limit(count)
    keyed = [column(c) for c in dict.fromkeys(columns)]
    rank = _unused("_rank", schema)
    numbered = df.withColumn(rank, F.row_number().over(Window.partitionBy(*keyed).orderBy(*by)))
    first = numbered.where(column(rank) <= count).select(*attrs)
    return first.sortWithinPartitions(*(c.asc() for c in keyed), *by)


def _unused(name: str, schema: SourceSchema) -> str:
    """`name`, with underscores added until no attribute is called so (as Spark resolves
    names: regardless of case)."""
    taken = {a.lower() for a, _ in schema}
    while name.lower() in taken:
        name += "_"
    return name
