"""CollectionIndex and its views against the relation's integral, scanned."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.state.collection_index import IndexView, RelationIndexes
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
