"""AntiJoin: the rows of the left stream whose key matches no row of the right stream.

This is how a negation `!atom` runs at the root (pomo_logic §2.5.2): the body's
rows (port 0) pass while the negated relation (port 1) has no row with their
key. The right side is read as a set: a key matches while its total weight is
positive, so a bag on the right (a projection of a set) gives the same answer.

Contract:
- Output row: the left row, with its weight, while its key has no right row.
- Not linear (in the right input): when a key's right side becomes non-empty,
  every left row of that key is retracted; when it becomes empty, they are all
  emitted again. Linear in the left input for a fixed right side.
- Port 0's delta meets port 1's old state, then port 1's delta meets port 0's new
  state (the default `eval` order), which gives exactly the change of the output.
- State (keyed_pair.py): the left rows by the key the node below upqueries by (the
  keyed side is always the left: the output is the left's columns), indexed by the
  antijoin columns too, and the right rows with their weights by the antijoin columns.
- Partial mode: an upquery asks the left input for the keys and the right input for the
  antijoin keys it lacks (a dependent upquery), and fills both at once. A delta whose
  key is missing is dropped; a left delta whose antijoin key is missing on the right
  evicts its key here and below.
- Full mode: both sides hydrated from their inputs; an upquery on other columns scans.
"""

from __future__ import annotations

from collections.abc import Mapping

from pomoview.dataflow.node import Node, project
from pomoview.dataflow.state.keyed_pair import KeyedPairOfRows
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet


def antijoin(
    left: ZSet[Row], right: ZSet[Row], left_keys: tuple[int, ...], right_keys: tuple[int, ...]
) -> ZSet[Row]:
    """The non-incremental operator: the left rows whose key has no positive right row."""
    matched = {project(row, right_keys) for row, weight in right.items() if weight > 0}
    return left.filter(lambda row: project(row, left_keys) not in matched)


def _matched(group: Mapping[Row, int] | None) -> bool:
    return group is not None and any(w > 0 for w in group.values())


class AntiJoin(KeyedPairOfRows):
    def __init__(
        self,
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
        side_key: tuple[int, ...] | None = None,
        other_partial: bool | None = None,
    ) -> None:
        super().__init__(
            left.schema,
            left,
            right,
            left_keys,
            right_keys,
            partial=partial,
            side_key=side_key,
            other_partial=other_partial,
        )

    def _output_sources(self, col: int) -> dict[int, int]:
        found = {0: col}
        if col in self.left_keys:
            found[1] = self.right_keys[self.left_keys.index(col)]
        return found

    def _emit(self, row: Row, weight: int, j: Key, out: ZSet[Row]) -> None:
        if not _matched(self.other.get(j)):
            out.add(row, weight)

    def _other_delta(self, j: Key, changes: list[tuple[Row, int]], out: ZSet[Row]) -> None:
        before = _matched(self.other.get(j))
        for row, weight in changes:
            self.other.add(j, row, weight)
        after = _matched(self.other.get(j))
        if before == after:
            return
        sign = -1 if after else 1
        for row, weight in (self.by_join.get(j) or {}).items():
            out.add(row, sign * weight)

    def describe(self) -> str:
        keys = tuple(self.inputs[0].schema[i] for i in self.left_keys)
        if not self.partial:
            return f"AntiJoin(on {keys}, full)"
        by = tuple(self.inputs[0].schema[i] for i in self.side_key)
        return f"AntiJoin(on {keys}, partial by {by})"
