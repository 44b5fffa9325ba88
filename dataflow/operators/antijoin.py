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
- State: both inputs, each indexed by the key (like Join): the left rows, and
  the right rows with their weights.
- Partial mode (the downstream key is the antijoin key): both sides are filled
  together for a key, so a key is present on both or on neither; a delta whose
  key is missing is dropped (and counted in `metrics.dropped`); an upquery asks
  both inputs for the missing keys before it fills either.
- Full mode: both sides hydrated from their inputs; an upquery on any columns is
  answered by scanning the left side.
"""

from __future__ import annotations

from ..keyed_pair import KeyedPair
from ..keyed_state import Key, Row
from ..node import Node, project
from ..zset import ZSet


def antijoin(
    left: ZSet[Row], right: ZSet[Row], left_keys: tuple[int, ...], right_keys: tuple[int, ...]
) -> ZSet[Row]:
    """The non-incremental operator: the left rows whose key has no positive right row."""
    matched = {project(row, right_keys) for row, weight in right.items() if weight > 0}
    return left.filter(lambda row: project(row, left_keys) not in matched)


def _matched(group: dict[Row, int] | None) -> bool:
    return group is not None and any(w > 0 for w in group.values())


class AntiJoin(KeyedPair):
    def __init__(
        self,
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
    ) -> None:
        super().__init__(left.schema, left, right, left_keys, right_keys, partial=partial)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        lefts, rights = self.sides
        out: ZSet[Row] = ZSet()
        if port == 0:
            for row, weight in delta.items():
                key = project(row, self.left_keys)
                if not lefts.add(key, row, weight):
                    self.metrics.dropped += 1
                    continue
                if not _matched(rights.get(key)):
                    out.add(row, weight)
            return out
        for key, changes in delta.index_with(lambda row: project(row, self.right_keys)).groups():
            if not rights.is_present(key):
                self.metrics.dropped += len(changes)
                continue
            before = _matched(rights.get(key))
            for row, weight in changes.items():
                rights.add(key, row, weight)
            after = _matched(rights.get(key))
            if before == after:
                continue
            sign = -1 if after else 1
            for row, weight in (lefts.get(key) or {}).items():
                out.add(row, sign * weight)
        return out

    def _output(self, key: Key) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        if _matched(self.sides[1].get(key)):
            return out
        for row, weight in (self.sides[0].get(key) or {}).items():
            out.add(row, weight)
        return out

    def describe(self) -> str:
        keys = tuple(self.inputs[0].schema[i] for i in self.left_keys)
        return f"AntiJoin(on {keys}, {'partial' if self.partial else 'full'})"
