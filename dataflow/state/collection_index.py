"""CollectionIndex: one access path into a relation for worst-case-optimal joins (3DF's
`CollectionIndex`, differential dataflow's dogsdogsdogs `CollectionIndex`).

An index over a relation of `arity` columns, for `key_cols` (the bound prefix, in that
order) and `value_col` (the column a join extends next), answers a prefix extender's three
questions:

- `count(prefix)`: how many distinct values extend `prefix` (a join proposes from the
  extender with the smallest count);
- `propose(prefix)`: those values, each with its weight;
- `validate(prefix, value)`: the weight of one extension, 0 when it is absent.

3DF keeps three arrangements per attribute and direction (counts, proposals, validation),
because an arrangement answers none of the others in O(1). Here one dict of dicts,
prefix -> {value -> weight}, answers all three: the count is the inner dict's length. It
holds one entry per distinct (prefix, value), so at most one per row of the relation; a
forward and a reverse index of a binary relation hold two entries per edge, and nothing
else.

Weights. A *covering* index (`key_cols` and `value_col` are every column between them)
holds each row's own Z-set weight, which a join multiplies. A non-covering one (a prefix of
a wider relation) holds the *support* of (prefix, value): how many distinct rows with a
non-zero weight extend it. It is non-zero exactly when some row extends it, whatever the
signs of the weights (a sum of the weights could cancel over rows that exist); the join
multiplies the row's weight once, at the covering index where the row is fully bound.

`RelationIndexes` holds the indexes of one relation, made on demand (only the access
paths some join needs, the 3DF seed's "skipped where not needed"; one made after rows
arrived is loaded from a covering index) and shared by every atom that reads the
relation, and by every join that reads the same node (`IndexRegistry`: two rules over
`edge` hold its indexes once). A step changes them in two phases so that readers can see
the relation both before and after the step's delta (the older/newer views of delta
queries): `changes(delta)` computes every index's change without touching it, an
`IndexView` answers over an index with or without those changes, and `apply` adds them
once the reader is done. Between joins sharing the relation, `step_changes` computes a
step's changes once: the first join of the step applies them when it is done, and the
joins after it see the relation before the step as the index minus the changes
(`negated`). Full state only: every prefix is present.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet

# One index's change in one step: prefix -> {value -> change of its weight (or support)}.
Changes = dict[Key, dict[Any, int]]

_SAMPLE = 64  # prefixes sized to estimate an index's bytes


class Extensions(Protocol):
    """What a prefix extender asks: a CollectionIndex, or an IndexView of one."""

    @property
    def covering(self) -> bool: ...

    def count(self, prefix: Key) -> int: ...

    def propose(self, prefix: Key) -> Mapping[Any, int]: ...

    def validate(self, prefix: Key, value: Any) -> int: ...


class CollectionIndex:
    __slots__ = ("arity", "key_cols", "value_col", "covering", "entries", "size")

    def __init__(self, arity: int, key_cols: tuple[int, ...], value_col: int) -> None:
        assert value_col not in key_cols and len(set(key_cols)) == len(key_cols)
        self.arity = arity
        self.key_cols = key_cols
        self.value_col = value_col
        self.covering = len(key_cols) + 1 == arity
        self.entries: dict[Key, dict[Any, int]] = {}
        self.size = 0  # the (prefix, value) entries held

    def count(self, prefix: Key) -> int:
        found = self.entries.get(prefix)
        return len(found) if found else 0

    def propose(self, prefix: Key) -> Mapping[Any, int]:
        """The extensions of `prefix` (not a copy: never to be changed by the caller)."""
        return self.entries.get(prefix) or {}

    def validate(self, prefix: Key, value: Any) -> int:
        found = self.entries.get(prefix)
        return found.get(value, 0) if found else 0

    def apply(self, changes: Changes) -> None:
        entries = self.entries
        for prefix, values in changes.items():
            found = entries.get(prefix)
            if found is None:
                found = entries[prefix] = {}
            for value, change in values.items():
                total = found.get(value, 0) + change
                if total:
                    self.size += value not in found
                    found[value] = total
                elif value in found:
                    del found[value]
                    self.size -= 1
            if not found:
                del entries[prefix]

    def rows(self) -> Iterator[tuple[Row, int]]:
        """Every row with its weight (a covering index only)."""
        assert self.covering, "a non-covering index does not hold rows"
        where = self.key_cols + (self.value_col,)
        order = sorted(range(self.arity), key=where.__getitem__)
        for prefix, values in self.entries.items():
            for value, weight in values.items():
                bound = prefix + (value,)
                yield tuple(bound[i] for i in order), weight

    def estimate_bytes(self) -> int:
        """The dicts and the prefix tuples, sized from the first `_SAMPLE` prefixes (the
        values themselves are shared with the rows of the inputs and not counted)."""
        total = sys.getsizeof(self.entries)
        if not self.entries:
            return total
        sample = list(itertools.islice(self.entries.items(), _SAMPLE))
        sampled = sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in sample)
        return total + sampled * len(self.entries) // len(sample)

    def describe(self) -> str:
        return f"{self.key_cols}->{self.value_col}"


def negated(changes: Changes) -> Changes:
    """The changes that undo `changes`: an applied index minus them is the index before."""
    return {prefix: {v: -change for v, change in values.items()} for prefix, values in changes.items()}


class IndexView:
    """An index as a join sees it in one step: with the step's `changes`, not applied."""

    __slots__ = ("index", "changes", "covering")

    def __init__(self, index: CollectionIndex, changes: Changes | None = None) -> None:
        self.index = index
        self.changes = changes or None
        self.covering = index.covering

    def count(self, prefix: Key) -> int:
        base = self.index.entries.get(prefix)
        n = len(base) if base else 0
        if self.changes is None:
            return n
        changed = self.changes.get(prefix)
        if changed:
            for value, change in changed.items():
                old = base.get(value, 0) if base else 0
                n += ((old + change) != 0) - (old != 0)
        return n

    def propose(self, prefix: Key) -> Mapping[Any, int]:
        base = self.index.entries.get(prefix) or {}
        changed = self.changes.get(prefix) if self.changes is not None else None
        if not changed:
            return base
        merged = dict(base)
        for value, change in changed.items():
            total = merged.get(value, 0) + change
            if total:
                merged[value] = total
            else:
                merged.pop(value, None)
        return merged

    def validate(self, prefix: Key, value: Any) -> int:
        base = self.index.entries.get(prefix)
        weight = base.get(value, 0) if base else 0
        if self.changes is not None:
            changed = self.changes.get(prefix)
            if changed:
                weight += changed.get(value, 0)
        return weight


@dataclass
class StepChanges:
    """One step's changes of a relation's indexes, for every join that reads it: `applied`
    once the first join of the step is done (the joins after it read the relation before
    the step as the indexes minus `changes`)."""

    stamp: Hashable
    delta: ZSet[Row]  # held so that its identity is not reused while the memo lives
    changes: dict[CollectionIndex, Changes]
    applied: bool = False
    finished: int = 0  # joins done with it
    undone: dict[int, Extensions] = field(default_factory=dict)  # by id(index): `before` views

    def before(self, index: CollectionIndex) -> Extensions:
        """`index` as it was before the step: the index itself until the changes are
        applied, then the index minus them (one view per index for the rest of the step)."""
        changed = self.changes.get(index)
        if not self.applied or not changed:
            return index
        found = self.undone.get(id(index))
        if found is None:
            found = self.undone[id(index)] = IndexView(index, negated(changed))
        return found

    def after(self, index: CollectionIndex) -> Extensions:
        """`index` with the step's changes: a view with them until they are applied, then
        the index itself."""
        changed = self.changes.get(index)
        return index if self.applied or not changed else IndexView(index, changed)


class RelationIndexes:
    """The indexes of one relation (of `arity` columns), shared by every atom over it."""

    def __init__(self, arity: int) -> None:
        self.arity = arity
        self.indexes: dict[tuple[tuple[int, ...], int], CollectionIndex] = {}
        self.loaded = False  # hydrated, by the first join that reads the relation
        self.readers = 0  # joins that read it (IndexRegistry)
        self._step: StepChanges | None = None

    def index(self, key_cols: tuple[int, ...], value_col: int) -> CollectionIndex:
        """The index for (`key_cols`, `value_col`), made at its first use from the rows of a
        covering index (which every relation holding rows has: its first delta made one)."""
        found = self.indexes.get((key_cols, value_col))
        if found is None:
            rows = self.covering().rows() if any(i.size for i in self.indexes.values()) else iter(())
            found = CollectionIndex(self.arity, key_cols, value_col)
            changes: Changes = {}
            for row, weight in rows:
                values = changes.setdefault(tuple(row[c] for c in key_cols), {})
                # Distinct rows: a non-covering entry counts each once.
                values[row[value_col]] = values.get(row[value_col], 0) + (weight if found.covering else 1)
            found.apply(changes)
            self.indexes[(key_cols, value_col)] = found
            step = self._step
            if step is not None:
                # Made between two joins of a step: its part of the step's changes, against
                # the rows as they were before the step.
                covering = self.covering()
                held = step.before(covering)
                step.changes[found] = self._changes(step.delta, [found], covering, held)[found]
        return found

    def covering(self) -> CollectionIndex:
        """The relation's rows with their weights: its first covering index (made if none)."""
        for index in self.indexes.values():
            if index.covering:
                return index
        # The first delta makes one (`changes`): rows are never held without one.
        assert not any(i.size for i in self.indexes.values()), "rows held without a covering index"
        return self.index(tuple(range(self.arity - 1)), self.arity - 1)

    def changes(self, delta: ZSet[Row]) -> dict[CollectionIndex, Changes]:
        """What `delta` changes in each index, computed against the indexes as they are."""
        covering = self.covering()  # made first when none is: the rows are held there
        return self._changes(delta, list(self.indexes.values()), covering, covering)

    @staticmethod
    def _changes(
        delta: ZSet[Row], targets: list[CollectionIndex], at: CollectionIndex, rows_at: Extensions
    ) -> dict[CollectionIndex, Changes]:
        """What `delta` changes in each of `targets`, the rows' weights before it read from
        `rows_at`: the covering index `at`, or a view of it."""
        supports = any(not i.covering for i in targets)
        out: dict[CollectionIndex, Changes] = {i: {} for i in targets}
        for row, weight in delta.items():
            support = 0
            # A non-covering index counts rows that appear or vanish, whatever their weights.
            if supports:
                old = rows_at.validate(tuple(row[c] for c in at.key_cols), row[at.value_col])
                support = ((old + weight) != 0) - (old != 0)
            for index, changes in out.items():
                change = weight if index.covering else support
                if not change:
                    continue
                per_prefix = changes.setdefault(tuple(row[c] for c in index.key_cols), {})
                value = row[index.value_col]
                total = per_prefix.get(value, 0) + change
                if total:
                    per_prefix[value] = total
                else:
                    del per_prefix[value]
        return out

    def step_changes(self, stamp: Hashable, delta: ZSet[Row]) -> StepChanges:
        """The step's changes of the indexes for `delta`, the same for every join that reads
        the relation in the step `stamp` (the same delta object): computed for the first,
        applied when it calls `finish`."""
        step = self._step
        if step is None or step.stamp != stamp or step.delta is not delta:
            step = self._step = StepChanges(stamp, delta, self.changes(delta))
        return step

    def finish(self, step: StepChanges) -> None:
        """A join is done with the step: the first applies its changes; the last one of the
        joins reading the relation lets the memo go (a join rolled back never finishes:
        the next step's memo replaces it then)."""
        if not step.applied:
            self.apply(step.changes)
            step.applied = True
        step.finished += 1
        if step.finished >= self.readers and self._step is step:
            self._step = None

    def apply(self, changes: Mapping[CollectionIndex, Changes]) -> None:
        for index, changed in changes.items():
            index.apply(changed)

    def add(self, delta: ZSet[Row]) -> None:
        self.apply(self.changes(delta))

    def summary(self) -> tuple[int, int, int]:
        """(prefixes, entries, bytes) over every index."""
        indexes = self.indexes.values()
        return (
            sum(len(i.entries) for i in indexes),
            sum(i.size for i in indexes),
            sum(i.estimate_bytes() for i in indexes),
        )


class IndexRegistry:
    """The RelationIndexes of each node that worst-case-optimal joins read, shared by every
    join reading that node (a circuit builder holds one for its graph). Held by the node
    weakly: a node the graph dropped (a rolled-back build) takes its entry with it."""

    def __init__(self) -> None:
        self._of: weakref.WeakKeyDictionary[object, RelationIndexes] = weakref.WeakKeyDictionary()
        self._added: list[weakref.ref[object]] = []  # nodes whose relation came since `commit`

    def relation(self, node: object, arity: int) -> RelationIndexes:
        found = self._of.get(node)
        if found is None:
            found = self._of[node] = RelationIndexes(arity)
            self._added.append(weakref.ref(node))
        found.readers += 1
        return found

    def commit(self) -> None:
        self._added.clear()

    def rollback(self) -> None:
        """Forgets the relations made since `commit`: a build that failed may have loaded
        one that no join in the graph maintains, which a later join must not take as it is."""
        for ref in self._added:
            node = ref()
            if node is not None:
                self._of.pop(node, None)
        self._added.clear()
