"""Lookup answers: `Rows` (one key's rows) and `RowsByKey` (lookup_many's), with Arrow and
pandas conversions.

They subclass `list` and `dict` so that code treating an answer as plain rows keeps working;
the conversions import pyarrow / pandas only when called, since the client's own
dependencies are grpcio and protobuf alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from itertools import chain
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

# A relation's attributes in declared order, each (name, PomoLogic type).
Attributes = tuple[tuple[str, str], ...]
# A lookup_many key: the values of a key dict, in the order of the first key's attributes.
KeyTuple = tuple[object, ...]

# PomoLogic type -> pyarrow type factory name; a Cid travels as text, so it is a string here.
_ARROW_TYPES = {
    "int": "int64",
    "float": "float64",
    "string": "string",
    "cid": "string",
    "bool": "bool_",
    "bytes": "binary",
}


class MissingExtra(ImportError):
    """`to_arrow()` / `to_pandas()` was called without pyarrow / pandas installed; the
    message names the extra that installs them (`pomoview[arrow]`, `pomoview[pandas]`)."""


def _require(module: str, method: str, extra: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtra(
            f"{method} needs {module}: pip install 'pomoview[{extra}]'", name=module
        ) from err


class Rows(list[dict[str, object]]):
    """The rows of one key, as dicts of attribute -> value; a `list` with conversions.

    `attributes` is the view's (name, type) pairs when the client knows them (it learns
    them from `install()` and `describe()`), else None and the conversions infer types
    from the values.
    """

    attributes: Attributes | None = None

    def to_arrow(self) -> pa.Table:
        """The rows as a `pyarrow.Table`: one column per attribute, in the view's order with
        its types when known (an empty answer then still has its columns), else inferred
        from the values in sorted name order. Needs the `arrow` extra."""
        return _to_arrow(self, self.attributes, "to_arrow()", "arrow")

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a `pandas.DataFrame`, converted from `to_arrow()`. Needs the `pandas`
        extra."""
        return _to_pandas(self, self.attributes)


class RowsByKey(dict[KeyTuple, Rows]):
    """lookup_many's answer: each distinct key's `Rows`, keyed by the tuple of the key's
    values in the order of the first key dict's attributes, in the order the keys were
    first asked. The conversions concatenate the rows of all keys in that order."""

    attributes: Attributes | None = None

    def to_arrow(self) -> pa.Table:
        """All keys' rows as one `pyarrow.Table` (see `Rows.to_arrow`)."""
        return _to_arrow(self._all_rows(), self.attributes, "to_arrow()", "arrow")

    def to_pandas(self) -> pd.DataFrame:
        """All keys' rows as one `pandas.DataFrame` (see `Rows.to_pandas`)."""
        return _to_pandas(self._all_rows(), self.attributes)

    def _all_rows(self) -> list[dict[str, object]]:
        return list(chain.from_iterable(self.values()))


def _to_arrow(
    rows: list[dict[str, object]], attributes: Attributes | None, method: str, extra: str
) -> Any:
    pa = _require("pyarrow", method, extra)
    if attributes is not None and _fits(rows, attributes):
        schema = pa.schema([(name, getattr(pa, _ARROW_TYPES[t])()) for name, t in attributes])
        try:
            return pa.Table.from_pylist(rows, schema=schema)
        except pa.ArrowException:
            pass  # the types are stale (a program installed since, by another client)
    # Unknown or stale attributes: the values decide, which an empty answer cannot, so it
    # has no columns.
    return pa.Table.from_pylist(rows)


def _to_pandas(rows: list[dict[str, object]], attributes: Attributes | None) -> Any:
    # pandas first: without it, pyarrow's to_pandas would fail with its own message.
    _require("pandas", "to_pandas()", "pandas")
    return _to_arrow(rows, attributes, "to_pandas()", "pandas").to_pandas()


def _fits(rows: Iterable[dict[str, object]], attributes: Attributes) -> bool:
    """Whether every row has exactly the attributes named (and of types pyarrow knows)."""
    if any(t not in _ARROW_TYPES for _, t in attributes):
        return False
    names = {name for name, _ in attributes}
    return all(row.keys() == names for row in rows)
