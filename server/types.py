"""Value and change types shared by the write path: the log, the source store and the service.

A tuple is always in its source's declared attribute order; a source schema is that order
with one type name per attribute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Value = int | float | str | bool | bytes
Tuple_ = tuple[Value, ...]  # a tuple in the source's declared attribute order
# A source schema: ordered (attribute name, type name) with type name in
# {"int", "float", "string", "bool", "bytes", "cid"}. A cid value is its CIDv1 text, a `str`
# (planner/cid.py), and is stored as a string; only the schema tells it from one.
SourceSchema = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SourceChange:
    """Inserts and deletes of one source within one batch."""

    inserts: tuple[Tuple_, ...]
    deletes: tuple[Tuple_, ...]


@dataclass(frozen=True)
class LoggedBatch:
    """One committed write batch: one epoch, changes to one or more sources."""

    epoch: int  # >= 1, strictly increasing in the log
    changes: Mapping[str, SourceChange]  # source name -> change
