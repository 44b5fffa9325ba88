"""Setting the presence of rows in a packed group (an IntSet of one column's values), as a
source index applies a write's operations to the group of one key.

This is the apply's innermost loop under a write load (a Zipf batch of votes brings a few
rows to each of hundreds of warm keys), so it works from the values as numpy arrays taken
once per batch: a key with few rows tests each value by one binary search, a key with many
tests them all at once, and the set is changed once per key (`add_many`, `discard_many`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pomoview.dataflow.state.int_set import IntSet

Row = tuple[object, ...]

# From this many rows a key's values are tested in one numpy call (below, numpy's fixed
# cost per call outweighs a binary search per value).
PACKED_BATCH_MIN = 16


def packed_presence(
    ints: IntSet, rows: Sequence[Row], values: np.ndarray, inserting: np.ndarray
) -> list[tuple[Row, int]]:
    """Makes each row present (`inserting`) or absent in `ints`, where `values` (int64) are
    the rows' values in the packed column, distinct (the rows are distinct and share their
    key). Returns the rows whose presence changed, each with +1 or -1."""
    if len(rows) < PACKED_BATCH_MIN:
        return _one_by_one(ints, rows, values.tolist(), inserting.tolist())
    held = ints.contains_many(values)
    adds = inserting & ~held
    removes = ~inserting & held
    if adds.any():
        ints.add_many(values[adds].tolist())
    if removes.any():
        ints.discard_many(values[removes].tolist())
    signs = adds.astype(np.int8) - removes.astype(np.int8)
    return [(row, sign) for row, sign in zip(rows, signs.tolist(), strict=True) if sign]


def _one_by_one(
    ints: IntSet, rows: Sequence[Row], values: list[int], inserting: list[bool]
) -> list[tuple[Row, int]]:
    base, added, removed = ints.base, ints.added, ints.removed
    size = len(base)
    adds: list[int] = []
    removes: list[int] = []
    changed: list[tuple[Row, int]] = []
    for row, value, insert in zip(rows, values, inserting, strict=True):
        if value in added:
            present = True
        elif value in removed or not size:
            present = False
        else:
            i = int(base.searchsorted(value))
            present = i < size and int(base[i]) == value
        if insert and not present:
            adds.append(value)
            changed.append((row, 1))
        elif not insert and present:
            removes.append(value)
            changed.append((row, -1))
    if adds:
        ints.add_many(adds)
    if removes:
        ints.discard_many(removes)
    return changed
