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

from collections.abc import Collection

from ..keyed_state import Key, KeyedState, Row
from ..node import Node, group_by_key, project, select_keys
from ..zset import ZSet


def antijoin(
    left: ZSet[Row], right: ZSet[Row], left_keys: tuple[int, ...], right_keys: tuple[int, ...]
) -> ZSet[Row]:
    """The non-incremental operator: the left rows whose key has no positive right row."""
    matched = {project(row, right_keys) for row, weight in right.items() if weight > 0}
    return left.filter(lambda row: project(row, left_keys) not in matched)


def _matched(group: dict[Row, int] | None) -> bool:
    return group is not None and any(w > 0 for w in group.values())


class AntiJoin(Node):
    stateful = True

    def __init__(
        self,
        left: Node,
        right: Node,
        left_keys: tuple[int, ...],
        right_keys: tuple[int, ...],
        *,
        partial: bool,
    ) -> None:
        assert len(left_keys) == len(right_keys)
        super().__init__(left.schema, (left, right))
        self.left_keys = left_keys
        self.right_keys = right_keys
        self.sides = (KeyedState(partial=partial), KeyedState(partial=partial))

    @property
    def partial(self) -> bool:
        return self.sides[0].partial

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

    def hydrate(self) -> None:
        if self.partial:
            return
        for side, node, cols in (
            (0, self.inputs[0], self.left_keys),
            (1, self.inputs[1], self.right_keys),
        ):
            for row, weight in node.query((), [()]).items():
                self.sides[side].add(project(row, cols), row, weight)

    def _output(self, key: Key) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        if _matched(self.sides[1].get(key)):
            return out
        for row, weight in (self.sides[0].get(key) or {}).items():
            out.add(row, weight)
        return out

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        if cols == self.left_keys:
            missing = self.sides[0].missing(keys)
            if missing:
                # Ask both inputs before filling either: an input that cannot answer yet
                # (it raises) leaves both sides without the key, nothing half done.
                answers = [
                    group_by_key(node.query(key_cols, missing).items(), key_cols, missing)
                    for node, key_cols in (
                        (self.inputs[0], self.left_keys),
                        (self.inputs[1], self.right_keys),
                    )
                ]
                for side, got in enumerate(answers):
                    for key, rows in got.items():
                        self.sides[side].fill(key, rows)
                self.metrics.filled_keys += len(missing)
            out: ZSet[Row] = ZSet()
            for key in dict.fromkeys(keys):
                out.extend(self._output(key))
            return out
        assert not self.partial, f"partial antijoin queried on {cols}, keyed on {self.left_keys}"
        out = ZSet()
        for key, _ in list(self.sides[0].groups()):
            out.extend(self._output(key))
        return select_keys(out, cols, set(keys))

    def describe(self) -> str:
        keys = tuple(self.inputs[0].schema[i] for i in self.left_keys)
        return f"AntiJoin(on {keys}, {'partial' if self.partial else 'full'})"
