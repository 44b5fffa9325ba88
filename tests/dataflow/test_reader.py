"""Reader and Circuit.lookup: partial readers fill on miss, drop writes at missing keys."""

from __future__ import annotations

import pytest
from dataflow_harness import Store, epochs
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit, topological_order
from pomoview.dataflow.operators.distinct_incremental import DistinctIncremental
from pomoview.dataflow.operators.join import Join
from pomoview.dataflow.operators.map import Column, Map
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.zset import ZSet

SCHEMAS = {"r": ("a", "b"), "s": ("b", "c")}
SETTINGS = settings(max_examples=60, deadline=None)


def joined(store: Store) -> set[tuple]:
    """π(a, c) (r ⋈ s on b): a set, from scratch."""
    return {(a, c) for (a, b) in store.data["r"] for (b2, c) in store.data["s"] if b == b2}


def build(store: Store, reader_key: tuple[int, ...], partial: bool) -> Circuit:
    """r(a,b) ⋈ s(b,c) projected to (a, c), distinct, read by `reader_key`.

    Partial only when keyed on a: the key traces to r.a, but the join is on b,
    so (as in the planner) the join and the sources stay full.
    """
    join = Join(store.index("r", (), False), store.index("s", (), False), (1,), (0,), partial=False)
    proj = Map(join, ("a", "c"), [Column(0), Column(2)])
    distinct = DistinctIncremental(proj, reader_key, partial=partial)
    circuit = Circuit(Reader(distinct, reader_key, partial=partial))
    circuit.hydrate()
    return circuit


@pytest.mark.parametrize("reader_key", [(), (0,), (1,), (0, 1)])
@SETTINGS
@given(history=epochs(("r", "s")), data=st.data())
def test_lookups_match_from_scratch(reader_key: tuple, history: list, data: st.DataObject) -> None:
    store = Store(SCHEMAS)
    store.apply(history[0][0])
    partial = bool(reader_key)
    circuit = build(store, reader_key, partial)
    asked: set = set()
    for batch, _ in history[1:]:
        dropped = circuit.metrics.dropped
        before = joined(store)
        circuit.step(store.apply(batch))
        after = joined(store)
        changed = {tuple(row[c] for c in reader_key) for row in before ^ after}
        if partial:
            # a set change at a key never asked for must have been dropped somewhere
            # (multiset-only changes below the distinct may be dropped too)
            if changed - asked:
                assert circuit.metrics.dropped > dropped
            if not changed and not (batch["r"] or batch["s"]):
                assert circuit.metrics.dropped == dropped
        else:
            assert circuit.metrics.dropped == 0
        keys = data.draw(st.lists(st.tuples(*[st.integers(0, 2)] * len(reader_key)), max_size=3))
        if not reader_key:
            keys = [()]
        for key in keys:
            if partial and key not in asked:
                assert circuit.reader.read(key) is None
        results = circuit.lookup(keys)
        asked |= set(keys)
        for key, rows in zip(keys, results, strict=True):
            want = {row for row in after if tuple(row[c] for c in reader_key) == key}
            assert len(rows) == len(set(rows))
            assert set(rows) == want
        for key in asked:  # keys asked before stay present (nothing evicts here) and correct
            want = {row for row in after if tuple(row[c] for c in reader_key) == key}
            held = circuit.reader.read(key)
            assert held is not None, f"asked key {key} went missing"
            assert set(held) == want


def test_full_reader_answers_empty_for_unknown_key() -> None:
    store = Store(SCHEMAS)
    circuit = build(store, (0,), partial=False)
    assert circuit.lookup([(9,)]) == [[]]
    assert circuit.reader.read((9,)) == []


def test_topological_order_inputs_first() -> None:
    store = Store(SCHEMAS)
    circuit = build(store, (0,), partial=True)
    order = circuit.nodes
    assert order[-1] is circuit.reader
    position = {id(n): i for i, n in enumerate(order)}
    for node in order:
        for parent in node.inputs:
            assert position[id(parent)] < position[id(node)]
    assert topological_order([circuit.reader]) == order
    assert set(circuit.relations()) == {"r", "s"}


def by_b(store: Store) -> Circuit:
    """r(a,b) ⋈ s(b,c) projected to (b, c), read by b: keyed on the join column, so the
    sources, the join, the distinct and the reader are all partial by b."""
    join = Join(store.index("r", (1,), True), store.index("s", (0,), True), (1,), (0,), partial=True)
    proj = Map(join, ("b", "c"), [Column(1), Column(2)])
    distinct = DistinctIncremental(proj, (0,), partial=True)
    return Circuit(Reader(distinct, (0,), partial=True))


def explained(circuit: Circuit) -> list[tuple[str, str]]:
    """`Circuit.explain()` parsed: (node path, description) per line."""
    lines = [line.split(": ", 1) for line in circuit.explain().splitlines()]
    assert all(len(parts) == 2 for parts in lines), circuit.explain()
    return [(path, text) for path, text in lines]


def test_explain_names_each_operator_inputs_first_with_its_keys_and_mode() -> None:
    """Two circuits over the same sources, one read by a (full: the join is on b), one by b
    (partial throughout): each line is a node, inputs first, and says what that node is
    keyed by and whether its state is partial or full, from the parameters it was built with."""
    store = Store(SCHEMAS)
    full = build(store, (0,), partial=False)
    assert explained(full) == [
        ("0", "SourceIndex(r by (), full)"),
        ("1", "SourceIndex(s by (), full)"),
        ("2", "Join(on ('b',), full)"),
        ("3", "Map('a', 'c')"),
        ("4", "DistinctIncremental('a', 'c') by ('a',), full"),
        ("5", "Reader('a', 'c') by ('a',), full"),
    ]
    partial = by_b(store)
    assert explained(partial) == [
        ("0", "SourceIndex(r by ('b',), partial)"),
        ("1", "SourceIndex(s by ('b',), partial)"),
        ("2", "Join(on ('b',), partial by left ('b',))"),
        ("3", "Map('b', 'c')"),
        ("4", "DistinctIncremental('b', 'c') by ('b',), partial"),
        ("5", "Reader('b', 'c') by ('b',), partial"),
    ]
    # The paths are the nodes' own, in `nodes` order (inputs first).
    assert [path for path, _ in explained(partial)] == [
        ".".join(map(str, n.global_id)) for n in partial.nodes
    ]


def test_a_readers_description_says_its_key_and_mode() -> None:
    store = Store(SCHEMAS)
    full, partial = build(store, (0,), partial=False).reader, by_b(store).reader
    # In SourceIndex's words: `by (key columns)` and the mode.
    assert "by ('a',)" in full.describe() and "full" in full.describe()
    assert "by ('b',)" in partial.describe() and "partial" in partial.describe()


def test_reader_is_a_sink() -> None:
    store = Store(SCHEMAS)
    circuit = build(store, (0,), partial=True)
    with pytest.raises(AssertionError):
        circuit.reader.query((0,), [(1,)])
    assert circuit.reader.on_delta(0, ZSet({(1, 1): 1})) == ZSet()


def test_a_published_read_in_an_open_step_answers_the_last_published_version() -> None:
    """While a step is open, a read marked `published` answers each key as of the last
    published epoch, from `before`, even where the wire cache already holds an encoding of
    the step's own version of the key (encoded by a read that was not marked)."""
    store = Store(SCHEMAS)
    store.apply({"r": {(1, 10): 1, (2, 20): 1}})
    reader = Reader(store.index("r", (0,), False), (0,), partial=False)
    circuit = Circuit(reader)
    circuit.hydrate()

    def encode(rows: list[tuple]) -> tuple:
        return tuple(sorted(rows))

    assert reader.encoded_all([(1,), (2,)], encode) == [((1, 10),), ((2, 20),)]
    reader.open_step()
    circuit.step(store.apply({"r": {(1, 10): -1, (1, 11): 1}}))
    assert reader.encoded_all([(1,)], encode) == [((1, 11),)]  # the step's version, cached
    assert reader.encoded_all([(1,), (2,)], encode, published=True) == [((1, 10),), ((2, 20),)]
    reader.publish()
    assert reader.encoded_all([(1,), (2,)], encode, published=True) == [((1, 11),), ((2, 20),)]
