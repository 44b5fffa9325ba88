"""Which tuples a source's operations leave present: a tuple is present iff its latest
operation (the largest `(_epoch, _op)`, an insert winning a tie) inserts it. A fetch reads
operations and answers with the present tuples, by rows in Python or by Arrow's grouping."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pomoview.server.types import SourceSchema, Tuple_, Value

_NAN = object()


def _from_spark(value: Any) -> Value:
    if isinstance(value, bytearray):
        return bytes(value)
    result: Value = value
    return result


def latest_of_rows(rows: Sequence[Any], schema: SourceSchema) -> list[Tuple_]:
    """The tuples whose latest operation among `rows` (attributes..., _epoch, _op) inserts."""
    width = len(schema)
    binary = any(t == "bytes" for _, t in schema)
    floats = [i for i, (_, t) in enumerate(schema) if t == "float"]
    best: dict[Any, tuple[tuple[int, int], Tuple_]] = {}
    for row in rows:
        values: Tuple_ = (
            tuple(_from_spark(v) for v in row[:width]) if binary else tuple(row[:width])
        )
        key: Any = values
        if floats:  # every NaN is one value to Spark, as each tuple is one tuple to the model
            key = tuple(_NAN if i in floats and v != v else v for i, v in enumerate(values))
        stamp = (row[width], row[width + 1])
        seen = best.get(key)
        if seen is None or stamp > seen[0]:
            best[key] = (stamp, values)
    return [values for (_epoch, op), values in best.values() if op == 1]


def latest_of_table(table: pa.Table, schema: SourceSchema) -> list[Tuple_]:
    """`latest_of_rows` over an Arrow table of operations (attributes..., _epoch, _op): the tuples
    whose latest operation inserts, deduplicated by Arrow's hash grouping. Float attributes
    take the row path, where every NaN is one value (as it is to Spark)."""
    present = latest_columns(table, schema)
    if present is None:
        rows = list(zip(*(c.to_pylist() for c in table.columns), strict=True))
        return latest_of_rows(rows, schema)
    return list(zip(*(c.to_pylist() for c in present.columns), strict=True))


def latest_columns(table: pa.Table, schema: SourceSchema, *, dedupe: bool = True) -> pa.Table | None:
    """The present tuples as an Arrow table of the attributes (columns `c0`, `c1`, ...), or
    None when Arrow cannot decide it (a float attribute: NaN; no attribute). Without
    `dedupe`, a tuple inserted more than once (and never deleted) may appear more than once:
    the caller removes repeats itself (a sort does it for free)."""
    width = len(schema)
    if width == 0 or any(t == "float" for _, t in schema):
        return None
    # Positional names: an attribute may be called anything but the store's own columns.
    names = [f"c{i}" for i in range(width)]
    table = table.rename_columns([*names, "_epoch", "_op"])
    if table.num_rows > 1:
        if pc.all(pc.equal(table.column("_op"), 1)).as_py():
            if not dedupe:
                return table.select(names)
            return table.select(names).group_by(names, use_threads=False).aggregate([])
        # The latest operation of a tuple: the largest (epoch, op), an insert winning a
        # tie (as in `latest_of_rows`), as one number; it inserts iff its low bits say +1.
        stamp = pc.add(
            pc.multiply(table.column("_epoch"), 4), pc.add(table.column("_op").cast(pa.int64()), 1)
        )
        grouped = (
            table.select(names)
            .append_column("_stamp", stamp)
            .group_by(names, use_threads=False)
            .aggregate([("_stamp", "max")])
        )
        keep = grouped.filter(pc.equal(pc.bit_wise_and(grouped.column("_stamp_max"), 3), 2))
        return keep.select(names)
    if table.num_rows == 1 and table.column("_op")[0].as_py() != 1:
        return table.select(names).slice(0, 0)
    return table.select(names)
