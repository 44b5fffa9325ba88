"""Base relations as Parquet operation logs, written and read by Spark (DESIGN §4).

Layout under `root` (a local folder for now)::

    manifest.json                     {"version": v, "sources": {name: {"schema": [[a, t], ...],
                                                                        "parts": [folder, ...]}}}
    <source>/part-<from>-<to>/        a Parquet dataset written by Spark: one row per logged
                                      operation, columns = attributes..., _epoch, _op (+1/-1)

The manifest is the only truth: a part is visible once the manifest that lists it has
replaced the old one atomically, and parts are immutable, so a reader that took a manifest
snapshot sees exactly the state at that snapshot's version. Folders the manifest does not
list (a flush that crashed before its manifest) are deleted at open.

A tuple is present at version v iff its latest operation with epoch <= v is an insert.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .fsync import fsync_path
from .types import LoggedBatch, SourceSchema, Tuple_, Value

_SPARK_TYPES: dict[str, Callable[[], DataType]] = {
    "int": LongType,
    "float": DoubleType,
    "string": StringType,
    "bool": BooleanType,
    "bytes": BinaryType,
}
_RESERVED = {"_epoch", "_op"}
_MANIFEST = "manifest.json"
_PART_PREFIX = "part-"
_TMP_PREFIX = ".tmp-"
# Up to this many keys a single-column filter is an IN list; beyond it a broadcast semi-join,
# whose plan size does not grow with the keys.
_ISIN_LIMIT = 256
# Up to this many keys over several columns, an OR of ANDs; beyond it a broadcast semi-join.
_OR_LIMIT = 32
# Source names become folder names.
_SOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SchemaMismatch(Exception):
    """A source is stored with a different schema than the one declared now."""


@dataclass(frozen=True)
class _SourceState:
    schema: SourceSchema
    parts: tuple[str, ...]


@dataclass(frozen=True)
class _Snapshot:
    version: int
    sources: Mapping[str, _SourceState]


def _fsync_tree(path: Path) -> None:
    # Spark's local file system never fsyncs; the log is truncated behind what the manifest
    # lists, so the part must be on disk before the manifest names it.
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


def _check_schema(name: str, schema: SourceSchema) -> None:
    if not _SOURCE_NAME.fullmatch(name):
        raise ValueError(f"source name {name!r} is not an identifier")
    seen: set[str] = set()
    for attr, type_name in schema:
        if type_name not in _SPARK_TYPES:
            raise ValueError(f"source {name!r}, attribute {attr!r}: unknown type {type_name!r}")
        if attr in _RESERVED:
            raise ValueError(f"source {name!r}: attribute name {attr!r} is reserved")
        # Spark resolves column names case-insensitively by default.
        if attr.lower() in seen:
            raise ValueError(f"source {name!r}: attribute {attr!r} appears twice")
        seen.add(attr.lower())


def _describe(schema: SourceSchema) -> str:
    return "(" + ", ".join(f"{a}: {t}" for a, t in schema) + ")"


def _schema_difference(name: str, stored: SourceSchema, declared: SourceSchema) -> str:
    for i, (old, new) in enumerate(zip(stored, declared, strict=False)):
        if old != new:
            return (
                f"source {name!r} is stored with attribute {i + 1} as '{old[0]}: {old[1]}', "
                f"but is now declared with '{new[0]}: {new[1]}'"
            )
    longer, which = (stored, "stored") if len(stored) > len(declared) else (declared, "declared")
    extra = longer[min(len(stored), len(declared))]
    return (
        f"source {name!r} is stored as {_describe(stored)} but declared as "
        f"{_describe(declared)}: attribute '{extra[0]}' is only {which}"
    )


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _to_spark(value: Value, type_name: str) -> Value:
    # Spark's DoubleType refuses a Python int; a float attribute may be given a whole number.
    if type_name == "float" and type(value) is int:
        return float(value)
    return value


def _from_spark(value: Any) -> Value:
    if isinstance(value, bytearray):
        return bytes(value)
    result: Value = value
    return result


def _struct(schema: SourceSchema) -> StructType:
    return StructType(
        [StructField(attr, _SPARK_TYPES[t](), nullable=False) for attr, t in schema]
        + [
            StructField("_epoch", LongType(), nullable=False),
            StructField("_op", ByteType(), nullable=False),
        ]
    )


class SourceStore:
    """The flushed base relations, with a version: the last epoch flushed.

    `spark` is called whenever Spark is needed and must return the shared session; opening a
    store reads only the manifest and does not need Spark. `flush` calls are serialized;
    `fetch` may run concurrently with them and answers from one manifest snapshot.
    One store per root at a time: opening deletes the folders its manifest does not list,
    which would include another open store's flush in progress.
    """

    def __init__(self, root: str, spark: Callable[[], SparkSession]) -> None:
        self._root = Path(root)
        self._spark = spark
        self._lock = threading.Lock()  # guards _snapshot
        self._flush_lock = threading.Lock()  # one manifest writer at a time
        self._root.mkdir(parents=True, exist_ok=True)
        self._snapshot = self._read_manifest()
        self._remove_strays()

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
        _check_schema(name, schema)
        with self._flush_lock:
            current = self._current()
            stored = current.sources.get(name)
            if stored is not None:
                if stored.schema != schema:
                    raise SchemaMismatch(_schema_difference(name, stored.schema, schema))
                return
            sources = dict(current.sources)
            sources[name] = _SourceState(schema=schema, parts=())
            self._publish(_Snapshot(version=current.version, sources=sources))

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
                            values = tuple(_to_spark(v, ty) for v, ty in zip(t, types, strict=True))
                            out.append((*values, batch.epoch, op))
            first, last = batches[0].epoch, batches[-1].epoch
            part = f"{_PART_PREFIX}{first:020d}-{last:020d}"
            sources = dict(current.sources)
            for name, source_rows in rows.items():
                if not source_rows:
                    continue
                state = sources[name]
                self._write_part(name, part, state.schema, source_rows)
                sources[name] = _SourceState(schema=state.schema, parts=(*state.parts, part))
            self._publish(_Snapshot(version=last, sources=sources))
            return last

    def fetch(
        self, source: str, columns: Sequence[str], keys: Collection[tuple[Value, ...]]
    ) -> tuple[int, list[Tuple_]]:
        """The tuples of `source` present at the current version whose `columns` are in `keys`.

        Returns (version, tuples), tuples in declared attribute order, in no particular order.
        `columns == ()` with `keys == {()}` is a full scan. Runs one Spark job (none if the
        answer is empty without reading). Raises KeyError for an unknown source or column and
        ValueError for a key of the wrong length.
        """
        with self._lock:
            snapshot = self._snapshot
        state = snapshot.sources.get(source)
        if state is None:
            raise KeyError(f"source {source!r} is not registered in the store")
        types = dict(state.schema)
        for c in columns:
            if c not in types:
                raise KeyError(f"source {source!r} has no attribute {c!r}")
        key_list = [
            tuple(_to_spark(v, types[c]) for v, c in zip(k, columns, strict=True)) for k in keys
        ]
        if not state.parts or not key_list:
            return snapshot.version, []
        spark = self._spark()
        df = spark.read.schema(_struct(state.schema)).parquet(
            *(str(self._root / source / p) for p in state.parts)
        )
        if columns:
            df = self._filter(spark, df, state.schema, list(columns), key_list)
        attrs = [a for a, _ in state.schema]
        latest = (
            df.groupBy(*(_col(a) for a in attrs))
            .agg(F.max(F.struct(_col("_epoch"), _col("_op"))).alias("_latest"))
            .where(F.col("_latest._op") == 1)
            .select(*(_col(a) for a in attrs))
        )
        result = [tuple(_from_spark(v) for v in row) for row in latest.collect()]
        return snapshot.version, result

    @staticmethod
    def _filter(
        spark: SparkSession,
        df: DataFrame,
        schema: SourceSchema,
        columns: list[str],
        keys: list[tuple[Value, ...]],
    ) -> DataFrame:
        distinct = list(dict.fromkeys(keys))
        if len(columns) == 1 and len(distinct) <= _ISIN_LIMIT:
            return df.where(_col(columns[0]).isin([k[0] for k in distinct]))
        if len(distinct) <= _OR_LIMIT:
            # A predicate, unlike a join, reaches the Parquet reader and needs no broadcast.
            return df.where(
                functools.reduce(
                    Column.__or__,
                    (
                        functools.reduce(
                            Column.__and__,
                            (_col(c) == F.lit(v) for c, v in zip(columns, k, strict=True)),
                        )
                        for k in distinct
                    ),
                )
            )
        types = dict(schema)
        key_names = [f"_k{i}" for i in range(len(columns))]
        key_df = spark.createDataFrame(
            distinct,
            schema=StructType(
                [
                    StructField(k, _SPARK_TYPES[types[c]](), nullable=False)
                    for k, c in zip(key_names, columns, strict=True)
                ]
            ),
        )
        condition = None
        for k, c in zip(key_names, columns, strict=True):
            term = df[c] == key_df[k]
            condition = term if condition is None else condition & term
        return df.join(F.broadcast(key_df), on=condition, how="left_semi")

    # --- manifest ---------------------------------------------------------------------------

    def _current(self) -> _Snapshot:
        with self._lock:
            return self._snapshot

    def _read_manifest(self) -> _Snapshot:
        path = self._root / _MANIFEST
        if not path.exists():
            return _Snapshot(version=0, sources={})
        doc = json.loads(path.read_text(encoding="utf-8"))
        sources = {
            name: _SourceState(
                schema=tuple((str(a), str(t)) for a, t in entry["schema"]),
                parts=tuple(entry["parts"]),
            )
            for name, entry in doc["sources"].items()
        }
        return _Snapshot(version=int(doc["version"]), sources=sources)

    def _publish(self, snapshot: _Snapshot) -> None:
        """Replace the manifest atomically and durably, then make `snapshot` the current one."""
        doc = {
            "version": snapshot.version,
            "sources": {
                name: {"schema": [list(p) for p in state.schema], "parts": list(state.parts)}
                for name, state in snapshot.sources.items()
            },
        }
        tmp = self._root / f"{_TMP_PREFIX}{uuid.uuid4().hex}-{_MANIFEST}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._root / _MANIFEST)
        fsync_path(self._root)
        with self._lock:
            self._snapshot = snapshot

    def _write_part(
        self, source: str, part: str, schema: SourceSchema, rows: list[tuple[Value, ...]]
    ) -> None:
        folder = self._root / source
        folder.mkdir(exist_ok=True)
        target = folder / part
        if target.exists():
            # Left by a flush that crashed before its manifest; never listed, never read.
            shutil.rmtree(target)
        tmp = folder / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
        spark = self._spark()
        df = spark.createDataFrame(rows, schema=_struct(schema))
        # One sorted file per part: the store's parts are small, and sorting on the attributes
        # gives Parquet row-group statistics that let keyed reads skip data.
        df.coalesce(1).sortWithinPartitions(*(_col(a) for a, _ in schema)).write.parquet(str(tmp))
        _fsync_tree(tmp)
        os.rename(tmp, target)
        fsync_path(folder)
        fsync_path(self._root)

    def _remove_strays(self) -> None:
        """Delete part and temporary folders the manifest does not list (crashed flushes)."""
        for entry in self._root.iterdir():
            if entry.name.startswith(_TMP_PREFIX) and entry.is_file():
                entry.unlink()
        for name, state in self._snapshot.sources.items():
            folder = self._root / name
            if not folder.is_dir():
                continue
            listed = set(state.parts)
            for entry in folder.iterdir():
                stray = entry.name.startswith(_TMP_PREFIX) or (
                    entry.name.startswith(_PART_PREFIX) and entry.name not in listed
                )
                if stray and entry.is_dir():
                    shutil.rmtree(entry)
