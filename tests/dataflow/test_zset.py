"""ZSet / IndexedZSet algebra laws (PomoFlow §2.1-2.2)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.zset import IndexedZSet, ZSet

elements = st.tuples(st.integers(0, 4), st.sampled_from("ab"))
weights = st.integers(-3, 3)
raw = st.lists(st.tuples(elements, weights), max_size=12)
zsets = raw.map(ZSet)

SETTINGS = settings(max_examples=150, deadline=None)


def _no_zero(z: ZSet) -> bool:
    return all(w != 0 for _, w in z.items())


def _summed(pairs: list) -> dict:
    out: dict = defaultdict(int)
    for e, w in pairs:
        out[e] += w
    return {e: w for e, w in out.items() if w}


@SETTINGS
@given(raw)
def test_construction_sums_weights_and_drops_zeros(pairs: list) -> None:
    z = ZSet(pairs)
    assert dict(z.items()) == _summed(pairs)
    assert _no_zero(z)
    assert len(z) == len(_summed(pairs))
    assert bool(z) == bool(_summed(pairs))
    for e, w in _summed(pairs).items():
        assert z.weight(e) == w
    assert ZSet(dict(z.items())) == z


@SETTINGS
@given(zsets, zsets, zsets)
def test_group_laws(a: ZSet, b: ZSet, c: ZSet) -> None:
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert a + ZSet() == a
    assert not (a - a)
    assert a - a == ZSet()
    negated = -a
    assert -negated == a
    assert a - b == a + (-b)
    assert -(a + b) == (-a) + (-b)
    for z in (a + b, a - b, -a, a - a):
        assert _no_zero(z)


@SETTINGS
@given(zsets, zsets)
def test_operators_do_not_mutate(a: ZSet, b: ZSet) -> None:
    a0, b0 = dict(a.items()), dict(b.items())
    _ = a + b, a - b, -a, a.distinct(), a.filter(lambda e: e[0] > 1), a.map(lambda e: e[1])
    assert dict(a.items()) == a0 and dict(b.items()) == b0


@SETTINGS
@given(zsets, zsets)
def test_extend_is_in_place_add(a: ZSet, b: ZSet) -> None:
    expected = a + b
    a.extend(b)
    assert a == expected
    assert _no_zero(a)
    # `a` holds its own weights, even when it was empty and took b's as a copy.
    b0 = dict(b.items())
    a.add((9, 9), 1)
    a.extend(a + ZSet())
    assert dict(b.items()) == b0


@SETTINGS
@given(zsets, zsets)
def test_distinct(a: ZSet, b: ZSet) -> None:
    d = a.distinct()
    assert dict(d.items()) == {e: 1 for e, w in a.items() if w > 0}
    assert d.distinct() == d  # idempotent
    assert sorted(a.positive()) == sorted(d.elements())
    # distinct is not linear, but it is on ZSets with positive weights
    pa, pb = ZSet({e: abs(w) for e, w in a.items()}), ZSet({e: abs(w) for e, w in b.items()})
    assert (pa + pb).distinct() == (pa.distinct() + pb.distinct()).distinct()


@SETTINGS
@given(zsets, zsets)
def test_filter_and_map_are_linear(a: ZSet, b: ZSet) -> None:
    pred = lambda e: e[0] % 2 == 0  # noqa: E731
    fn = lambda e: e[0] // 2  # noqa: E731  (collisions add weights)
    assert (a + b).filter(pred) == a.filter(pred) + b.filter(pred)
    assert (a + b).map(fn) == a.map(fn) + b.map(fn)
    assert (-a).map(fn) == -(a.map(fn))
    assert _no_zero(a.map(fn))
    expected: dict = defaultdict(int)
    for e, w in a.items():
        expected[fn(e)] += w
    assert dict(a.map(fn).items()) == {k: w for k, w in expected.items() if w}


@SETTINGS
@given(zsets)
def test_index_with_groups(a: ZSet) -> None:
    key = lambda e: e[1]  # noqa: E731
    idx = a.index_with(key)
    assert isinstance(idx, IndexedZSet)
    assert len(idx) == len(a)
    assert set(idx.keys()) == {key(e) for e in a.elements()}
    regrouped: ZSet = ZSet()
    for k, group in idx.groups():
        assert group, "no empty group is kept"
        assert _no_zero(group)
        for e, w in group.items():
            assert key(e) == k
            assert a.weight(e) == w
            regrouped.add(e, w)
        assert idx.group(k) == group
    assert regrouped == a
    assert idx.group("zz") is None


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from("xy"), elements, weights), max_size=12))
def test_indexed_zset_add_removes_empty_groups(triples: list) -> None:
    idx: IndexedZSet = IndexedZSet()
    flat: dict = defaultdict(int)
    for k, v, w in triples:
        idx.add(k, v, w)
        flat[(k, v)] += w
    flat = {kv: w for kv, w in flat.items() if w}
    assert {(k, v): w for k, g in idx.groups() for v, w in g.items()} == flat
    assert set(idx.keys()) == {k for k, _ in flat}
    other: IndexedZSet = IndexedZSet()
    for (k, v), w in flat.items():
        other.add(k, v, w)
    assert other == idx


def test_unhashable_and_repr() -> None:
    with pytest.raises(TypeError):
        hash(ZSet())
    with pytest.raises(TypeError):
        hash(IndexedZSet())
    assert "ZSet" in repr(ZSet({1: 2}))
    assert ZSet({(2,): 1, (1,): -1}).sorted_items() == [((1,), -1), ((2,), 1)]
    assert ZSet({1: 0}) == ZSet()
    assert ZSet() != {}
