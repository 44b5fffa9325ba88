"""CollectionIndex and its views against the relation's integral, scanned."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.state.collection_index import (
    CollectionIndex,
    Extensions,
    IndexRegistry,
    IndexView,
    RelationIndexes,
)
from pomoview.dataflow.zset import ZSet

ROW = st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))
DELTA = st.dictionaries(ROW, st.sampled_from((1, -1, 2, -3)), max_size=8)
PATHS = (((0,), 1), ((1,), 0), ((0, 1), 2), ((2, 0), 1), ((), 2))


def expected(total: ZSet, key_cols: tuple[int, ...], value_col: int) -> dict:
    """prefix -> {value -> weight (covering) or the number of rows beneath}."""
    covering = len(key_cols) == 2
    out: dict = {}
    for row, weight in total.items():
        values = out.setdefault(tuple(row[c] for c in key_cols), {})
        values[row[value_col]] = values.get(row[value_col], 0) + (weight if covering else 1)
    return out


@settings(max_examples=150, deadline=None)
@given(deltas=st.lists(DELTA, min_size=1, max_size=6))
def test_views_before_and_after_a_delta(deltas: list[dict]) -> None:
    relation = RelationIndexes(3)
    indexes = [relation.index(k, v) for k, v in PATHS]
    total: ZSet = ZSet()
    for ops in deltas:
        delta = ZSet(ops)
        changes = relation.changes(delta)
        after = total + delta
        for index in indexes:
            for view, state in ((IndexView(index), total), (IndexView(index, changes[index]), after)):
                want = expected(state, index.key_cols, index.value_col)
                for prefix in {*want, *index.entries, *changes[index]}:
                    values = want.get(prefix, {})
                    assert view.count(prefix) == len(values)
                    assert dict(view.propose(prefix)) == values
                    for value in range(3):
                        assert view.validate(prefix, value) == values.get(value, 0)
        relation.apply(changes)
        total = after
        for index in indexes:
            assert index.entries == expected(total, index.key_cols, index.value_col)
            assert index.size == sum(len(v) for v in index.entries.values())
    assert ZSet(dict(relation.covering().rows())) == total
    # An index made once rows are held is loaded from them.
    for key_cols, value_col in (((2,), 0), ((1, 2), 0), ((), 1)):
        late = relation.index(key_cols, value_col)
        assert late.entries == expected(total, key_cols, value_col)



def _answers(view: Extensions, index: CollectionIndex, *states: ZSet) -> dict:
    """What `view` (over `index`) answers for every prefix of `states` and of the index."""
    prefixes = {tuple(row[c] for c in index.key_cols) for state in states for row, _ in state.items()}
    out = {}
    for prefix in prefixes | set(index.entries):
        values = dict(view.propose(prefix))
        assert view.count(prefix) == len(values)
        if values:
            out[prefix] = values
    return out


@settings(max_examples=150, deadline=None)
@given(deltas=st.lists(DELTA, min_size=1, max_size=6), late=st.sampled_from(PATHS[1:]))
def test_a_step_shared_by_joins_is_computed_once_and_seen_before_after_it_is_applied(
    deltas: list[dict], late: tuple[tuple[int, ...], int]
) -> None:
    """`step_changes` gives every join of a step the same changes; once the first has
    finished (applied them), the index minus `negated(changes)` is the relation before the
    step, also for an index made between two joins of the step."""
    relation = RelationIndexes(3)
    relation.readers = 2  # two joins read it
    relation.index((0, 1), 2)
    total: ZSet = ZSet()
    for n, ops in enumerate(deltas):
        delta = ZSet(ops)
        first = relation.step_changes(("epoch", n), delta)
        assert relation.step_changes(("epoch", n), delta) is first
        relation.finish(first)  # the first join is done: applied
        assert first.applied
        second = relation.step_changes(("epoch", n), delta)
        assert second is first  # the second join gets the same changes, applied
        relation.index(*late)  # made between the two joins
        after = total + delta
        for index in relation.indexes.values():
            before = second.before(index)  # the index minus the applied changes
            want = expected(total, index.key_cols, index.value_col)
            assert _answers(before, index, total, after) == want, index.describe()
            assert index.entries == expected(after, index.key_cols, index.value_col)
        relation.finish(second)  # the last join: the next step computes afresh
        total = after
    # A step of another delta object, or at another stamp, is not the memo's.
    delta = ZSet({(9, 9, 9): 1})
    step = relation.step_changes(("epoch", 99), delta)
    assert relation.step_changes(("epoch", 99), ZSet({(9, 9, 9): 1})) is not step


def test_the_registry_shares_a_relation_per_node_and_forgets_one_a_build_rolled_back() -> None:
    """A node's relation is one object for every join reading it; a relation made since the
    last commit is forgotten by a rollback (a failed build may have loaded it, and no join
    in the graph maintains it), one committed before stays."""

    class Node:  # any object a join reads (held weakly)
        pass

    registry = IndexRegistry()
    kept, dropped = Node(), Node()
    first = registry.relation(kept, 2)
    assert registry.relation(kept, 2) is first and first.readers == 2
    registry.commit()
    made = registry.relation(dropped, 2)
    made.loaded = True
    assert registry.relation(kept, 2) is first  # shared since before: stays
    registry.rollback()
    assert registry.relation(kept, 2) is first
    fresh = registry.relation(dropped, 2)
    assert fresh is not made and not fresh.loaded
