"""The SQL text of a fetch's filters: one string per filter, which Spark parses in one call
however many keys it lists (building the same filter from `Column` objects costs a call into
the JVM per key)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pomoview.server.spark.columns import quoted
from pomoview.server.types import Value


def sql_literal(value: Value, type_name: str) -> str:
    """`value`, of the store's type `type_name`, as a literal of Spark SQL of the stored type."""
    if type_name == "int":
        number = int(value)
        return "(-9223372036854775807L - 1L)" if number == -(1 << 63) else f"{number}L"
    if type_name == "float":
        f = float(value)
        text = (
            "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity") if math.isinf(f) else repr(f)
        )
        return f"CAST('{text}' AS DOUBLE)"
    if type_name == "bool":
        return "TRUE" if value else "FALSE"
    if type_name in ("string", "cid"):
        assert isinstance(value, str)
        return f"CAST(X'{value.encode('utf-8').hex()}' AS STRING)"
    assert isinstance(value, bytes | bytearray)
    return f"X'{bytes(value).hex()}'"


def equals_sql(column: str, value: Value, type_name: str) -> str:
    """`column = value`."""
    return f"{quoted(column)} = {sql_literal(value, type_name)}"


def keys_sql(columns: Sequence[str], keys: Sequence[tuple[Value, ...]], types: Mapping[str, str]) -> str:
    """Rows whose `columns` are one of `keys`: an IN list for one column, else an OR of ANDs."""
    if len(columns) == 1:
        c = columns[0]
        return f"{quoted(c)} IN ({', '.join(sql_literal(k[0], types[c]) for k in keys)})"
    return (
        "("
        + " OR ".join(
            "(" + " AND ".join(equals_sql(c, v, types[c]) for c, v in zip(columns, k, strict=True)) + ")"
            for k in keys
        )
        + ")"
    )
