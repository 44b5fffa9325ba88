"""Setting the presence of rows in a packed group (an IntSet of one column's values), as a
source index applies a write's operations to the group of one key.

This is the apply's innermost loop under a write load (a Zipf batch of votes brings a few
rows to each of hundreds of warm keys), so it works from the values as numpy arrays taken
once per batch: a key with few rows tests each value by one binary search
(`IntSet.contains_each`), a key with many tests them all at once (`contains_many`), and the
set is changed once per key (`add_many`, `discard_many`).
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
    ints: IntSet, rows: Sequence[Row], values: list[int], inserting: list[bool]
) -> list[tuple[Row, int]]:
    """Makes each row present (`inserting`) or absent in `ints`, where `values` (64-bit
    ints) are the rows' values in the packed column, distinct (the rows are distinct and
    share their key). Returns the rows whose presence changed, each with +1 or -1."""
    if len(rows) < PACKED_BATCH_MIN:
        return _few(ints, rows, values, inserting)
    array = np.array(values, dtype=np.int64)
    wanted = np.array(inserting, dtype=bool)
    held = ints.contains_many(array)
    adds = wanted & ~held
    removes = ~wanted & held
    if adds.any():
        ints.add_many(array[adds].tolist())
    if removes.any():
        ints.discard_many(array[removes].tolist())
    signs = adds.astype(np.int8) - removes.astype(np.int8)
    return [(row, sign) for row, sign in zip(rows, signs.tolist(), strict=True) if sign]


def _few(
    ints: IntSet, rows: Sequence[Row], values: list[int], inserting: list[bool]
) -> list[tuple[Row, int]]:
    """`packed_presence` in plain Python: for a few rows, numpy's fixed cost per call is
    most of the work."""
    adds: list[int] = []
    removes: list[int] = []
    changed: list[tuple[Row, int]] = []
    for row, value, insert, held in zip(rows, values, inserting, ints.contains_each(values), strict=True):
        if insert and not held:
            adds.append(value)
            changed.append((row, 1))
        elif not insert and held:
            removes.append(value)
            changed.append((row, -1))
    if adds:
        ints.add_many(adds)
    if removes:
        ints.discard_many(removes)
    return changed
