"""Reader: the state a view's lookups are answered from, keyed by the lookup columns.

Contract:
- Input: the view's set delta. Output: none (a sink).
- State: the view's rows, indexed by the key columns.
- Partial mode: deltas for missing keys are dropped; a lookup that misses
  upqueries the input for the missing keys and keeps the answer.
- Full mode (no key columns, or no key provenance): hydrated at build time.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..keyed_state import Key, KeyedState, Row
from ..node import KeyedNode, Node, group_by_key, project
from ..zset import ZSet


class Reader(KeyedNode):
    kind = "sink"

    def __init__(self, parent: Node, key_cols: tuple[int, ...], *, partial: bool) -> None:
        super().__init__(parent.schema, (parent,), key_cols, partial=partial)
        # The partial states above, whose keys a read marks as used too (set by the Graph):
        # a hot reader key keeps the upstream keys it was derived from, where those are
        # keyed alike, through eviction sweeps.
        self.upstream: list[KeyedState] = []

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        for row, weight in delta.items():
            if not self.state.add(project(row, self.key_cols), row, weight):
                self.metrics.dropped += 1
        return ZSet()

    def missing(self, keys: Sequence[Key]) -> list[Key]:
        return self.state.missing(keys)

    def fill(self, keys: Sequence[Key]) -> None:
        """Upqueries the input for `keys` (all missing) and marks them present."""
        answer = self.inputs[0].query(self.key_cols, keys).items()
        for key, rows in group_by_key(answer, self.key_cols, keys).items():
            self.state.fill(key, rows)
        self.metrics.filled_keys += len(keys)

    def read(self, key: Key, *, touch: bool = True) -> list[Row] | None:
        """The view's rows for `key`, or None when the key is missing. A read marks the key
        as used (`touch`), unless it is the read that follows the key's fill."""
        group = self.state.get(key)
        if group is None:
            return None
        if touch and self.state.partial:
            self.state.touch(key)
            for state in self.upstream:
                state.touch(key)
        # Invariant: the reader holds a set (a Distinct feeds it).
        assert all(w == 1 for w in group.values()), f"reader multiset at {key!r}: {group}"
        return list(group)

    def lookup(self, keys: Sequence[Key]) -> list[list[Row]]:
        """The rows of each key, filling the missing keys with one upquery first."""
        missing = self.missing(keys)
        if missing:
            self.fill(missing)
        results: list[list[Row]] = []
        filled = set(missing)
        for key in keys:
            rows = self.read(key, touch=key not in filled)
            assert rows is not None
            results.append(rows)
        return results

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise AssertionError("a reader is a sink; nothing upqueries it")
