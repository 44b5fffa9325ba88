"""Linear operators and delays in a root circuit, over random insert/delete sequences.

Each test builds a root `Circuit` whose sources are `Input` nodes, steps it one
epoch per change set (weights -2..2 on a 3x3 domain of pairs, so elements are
inserted, deleted, re-derived and cancelled), and checks after every epoch that
the incremental node agrees with the non-incremental function:

* a linear operator: the running sum (integral) of its output equals the pure
  function applied to the integrals of its inputs;
* Z1: its output is the previous epoch's input;
* TraceAppend (+ Z1Trace), UntimedTraceAppend, Consolidate: the trace they
  carry consolidates to the integral of the input (before this epoch, for
  Z1Trace), and a cursor walks it by key, then value, then time.

The pure functions are also checked for linearity on their own: f(a + b) = f(a) + f(b).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.operators.filter import Filter, filter_zset
from pomoview.dataflow.operators.index_with import IndexWith, index_with
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.map import MapFn, map_zset
from pomoview.dataflow.operators.minus import Minus, minus
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.reference.consolidate import Consolidate, consolidate
from pomoview.dataflow.reference.inspect import Inspect
from pomoview.dataflow.reference.negate import Negate, negate
from pomoview.dataflow.reference.plus import Plus, plus
from pomoview.dataflow.reference.untimed_trace_append import UNTIMED, UntimedTraceAppend
from pomoview.dataflow.reference.z1 import Z1
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import Trace, TraceReader
from pomoview.dataflow.zset import IndexedZSet, ZSet

SETTINGS = settings(max_examples=60, deadline=None)
SCHEMA = ("x", "y")

ROWS = st.tuples(st.integers(0, 2), st.integers(0, 2))
ZSETS = st.dictionaries(ROWS, st.integers(-2, 2), max_size=6).map(ZSet)


def changes(sources: tuple[str, ...]) -> st.SearchStrategy[list[dict[str, ZSet]]]:
    """Epochs of changes, one ZSet per source (maybe empty, so some epochs are quiet)."""
    return st.lists(st.fixed_dictionaries({s: ZSETS for s in sources}), min_size=1, max_size=10)


def keep(row: tuple) -> bool:
    return row[0] <= row[1]


def total_of(row: tuple) -> tuple:
    return (row[0] + row[1],)  # collides: (0, 2), (1, 1) and (2, 0) all map to (2,)


def swap(row: tuple) -> tuple:
    return (row[1], row[0])


def first(row: tuple) -> object:
    return row[0]


def add_indexed(total: IndexedZSet, delta: IndexedZSet) -> None:
    for key, group in delta.groups():
        for value, weight in group.items():
            total.add(key, value, weight)


def run(sink: Node, history: list[dict[str, ZSet]]):
    """Steps a root circuit over `history`; yields (epoch, its changes, integrals so far, values)."""
    circuit = Circuit([sink])
    integrals: dict[str, ZSet] = {name: ZSet() for name in history[0]}
    for changeset in history:
        values = circuit.step(changeset)
        for name, delta in changeset.items():
            integrals[name].extend(delta)
        yield circuit.epoch, changeset, integrals, values


def is_walk_order(trace: TraceReader) -> bool:
    entries = [(k, v, t) for k, v, t, _ in trace.cursor()]
    return entries == sorted(entries) and len(set(entries)) == len(entries)


# -- the linear operators: integral of the output = f(integral of the inputs) -----------------

Build = Callable[..., Node]
Reference = Callable[..., ZSet]

LINEAR: dict[str, tuple[tuple[str, ...], Build, Reference]] = {
    "negate": (("a",), Negate, negate),
    "minus": (("a", "b"), Minus, minus),
    "minus-self": (("a",), lambda a: Minus(a, a), lambda a: ZSet()),
    "plus": (("a", "b"), Plus, plus),
    "plus-self": (("a",), lambda a: Plus(a, a), lambda a: plus(a, a)),
    "minus-of-plus": (("a", "b"), lambda a, b: Minus(Plus(a, b), Negate(b)), lambda a, b: a + b + b),
    "inspect": (("a",), lambda a: Inspect(a, lambda value, time: None), lambda a: a),
    "map-fn": (("a",), lambda a: MapFn(a, ("s",), total_of), lambda a: map_zset(total_of, a)),
    "map-fn-swap": (("a",), lambda a: MapFn(a, SCHEMA, swap), lambda a: map_zset(swap, a)),
    "filter": (("a",), lambda a: Filter(a, keep), lambda a: filter_zset(keep, a)),
    "filter-of-minus": (
        ("a", "b"),
        lambda a, b: Filter(Minus(a, b), keep),
        lambda a, b: filter_zset(keep, a - b),
    ),
}


@pytest.mark.parametrize("case", sorted(LINEAR))
@SETTINGS
@given(data=st.data())
def test_linear_operator_integrates_to_the_function(case: str, data: st.DataObject) -> None:
    sources, build, reference = LINEAR[case]
    history = data.draw(changes(sources))
    node = build(*(Input(s, SCHEMA) for s in sources))
    total: ZSet = ZSet()
    for _, _, integrals, values in run(node, history):
        out = values.get(id(node))
        if out is not None:
            assert isinstance(out, ZSet)
            total.extend(out)
        assert total == reference(*(integrals[s] for s in sources))


def test_minus_port_order_matters() -> None:
    a, b = Input("a", SCHEMA), Input("b", SCHEMA)
    node = Minus(a, b)
    values = Circuit([node]).step({"a": ZSet({(0, 0): 1}), "b": ZSet({(0, 0): 3, (1, 1): 1})})
    assert values[id(node)] == ZSet({(0, 0): -2, (1, 1): -1})


@SETTINGS
@given(changes(("a",)))
def test_inspect_sees_each_value_once_at_its_time(history: list[dict[str, ZSet]]) -> None:
    seen: list[tuple[Value, Time]] = []
    node = Inspect(Input("a", SCHEMA), lambda value, time: seen.append((value, time)))
    for epoch, changeset, _, values in run(node, history):
        delta = changeset["a"]
        if delta:
            out = values[id(node)]
            assert out == delta
            assert seen[-1][0] is out and seen[-1][1] == (epoch,)
        else:
            assert id(node) not in values  # idle: the callback is not called
        assert len(seen) == sum(1 for c in history[:epoch] if c["a"])


@SETTINGS
@given(changes(("a",)))
def test_index_with_integrates_to_the_index_of_the_integral(history: list[dict[str, ZSet]]) -> None:
    node = IndexWith(Input("a", SCHEMA), first)
    total: IndexedZSet = IndexedZSet()
    for _, _, integrals, values in run(node, history):
        out = values.get(id(node))
        if out is not None:
            assert isinstance(out, IndexedZSet)
            add_indexed(total, out)
        assert total == index_with(first, integrals["a"])


# -- delays ---------------------------------------------------------------------------------------


@SETTINGS
@given(changes(("a",)))
def test_z1_emits_the_previous_epoch(history: list[dict[str, ZSet]]) -> None:
    node = Z1(Input("a", SCHEMA))
    total: ZSet = ZSet()
    previous: ZSet = ZSet()
    before: ZSet = ZSet()  # the integral of the input up to the previous epoch
    # one quiet epoch at the end: the value held from the last epoch must still come out
    for _, changeset, integrals, values in run(node, history + [{"a": ZSet()}]):
        out = values.get(id(node))
        assert (out or ZSet()) == previous
        if out is not None:
            assert isinstance(out, ZSet)
            total.extend(out)
        assert total == before
        previous = changeset["a"]
        before = ZSet(dict(integrals["a"].items()))
    assert not node.busy()


@SETTINGS
@given(changes(("a",)))
def test_trace_append_and_z1_trace(history: list[dict[str, ZSet]]) -> None:
    append = TraceAppend(Input("a", SCHEMA))
    delayed = Z1Trace(append)
    per_epoch: list[ZSet] = [ZSet()]  # the input's delta at each epoch (epoch 0: none)
    for epoch, changeset, integrals, values in run(delayed, history):
        per_epoch.append(changeset["a"])
        trace = values[id(append)]
        assert trace is append.trace
        assert consolidate(trace) == integrals["a"]
        assert is_walk_order(trace)
        # compaction: every time before epoch - 1 has been folded onto epoch - 1
        assert all(epoch - 1 <= t[0] <= epoch for _, _, t, _ in trace.cursor())
        # ... and the weight of every row up to each time it can still be asked about is kept
        for row in {r for delta in per_epoch for r in delta.elements()}:
            for upto in range(max(epoch - 1, 0), epoch + 1):
                want = sum(delta.weight(row) for delta in per_epoch[: upto + 1])
                assert trace.weight(row, None, (upto,)) == want, (row, upto)
        before = values[id(delayed)]
        assert isinstance(before, TraceReader)
        assert consolidate(before) == integrals["a"] - changeset["a"]
        assert all(t != (epoch,) for _, _, t, _ in before.cursor())
        assert is_walk_order(before)


@SETTINGS
@given(changes(("a",)))
def test_trace_append_of_an_indexed_stream(history: list[dict[str, ZSet]]) -> None:
    append = TraceAppend(IndexWith(Input("a", SCHEMA), first))
    for _, _, integrals, values in run(append, history):
        trace = values[id(append)]
        assert isinstance(trace, Trace)
        assert trace.consolidate() == index_with(first, integrals["a"])
        assert is_walk_order(trace)


@pytest.mark.parametrize("indexed", [False, True], ids=["zset", "indexed"])
@SETTINGS
@given(history=changes(("a",)))
def test_untimed_trace_append(indexed: bool, history: list[dict[str, ZSet]]) -> None:
    source: Node = Input("a", SCHEMA)
    if indexed:
        source = IndexWith(source, first)
    append = UntimedTraceAppend(source)
    for _, _, integrals, values in run(append, history):
        trace = values[id(append)]
        assert trace is append.trace
        if indexed:
            assert trace.consolidate() == index_with(first, integrals["a"])
            assert consolidate(trace) == ZSet({(row[0], row): w for row, w in integrals["a"].items()})
        else:
            assert consolidate(trace) == integrals["a"]
        # one entry per (key, value), all at the single untimed time
        assert all(t == UNTIMED for _, _, t, _ in trace.cursor())
        assert len(trace) == len(integrals["a"])
        assert is_walk_order(trace)


# -- Consolidate: its input is a trace, the integral of the deltas appended to it ---------------


CONSOLIDATE: dict[str, tuple[Callable[[Node], Node], Callable[[ZSet, ZSet], ZSet]]] = {
    # builder of the node over Input a, and its value from (integral, this epoch's delta)
    "trace": (lambda a: Consolidate(TraceAppend(a)), lambda total, delta: total),
    "z1-trace": (lambda a: Consolidate(Z1Trace(TraceAppend(a))), lambda total, delta: total - delta),
    "untimed": (lambda a: Consolidate(UntimedTraceAppend(a)), lambda total, delta: total),
    "indexed": (
        lambda a: Consolidate(TraceAppend(IndexWith(a, first))),
        lambda total, delta: ZSet({(row[0], row): w for row, w in total.items()}),
    ),
}


@pytest.mark.parametrize("case", sorted(CONSOLIDATE))
@SETTINGS
@given(history=changes(("a",)))
def test_consolidate_of_a_trace_is_the_integral(case: str, history: list[dict[str, ZSet]]) -> None:
    build, want = CONSOLIDATE[case]
    node = build(Input("a", SCHEMA))
    for _, changeset, integrals, values in run(node, history):
        assert values[id(node)] == want(integrals["a"], changeset["a"])


# -- the pure functions are linear -----------------------------------------------------------------

UNARY: dict[str, Callable[[ZSet], object]] = {
    "negate": negate,
    "filter_zset": lambda z: filter_zset(keep, z),
    "map_zset": lambda z: map_zset(total_of, z),
    "minus-left": lambda z: minus(z, ZSet({(1, 1): 2})),
    "plus-left": lambda z: plus(z, ZSet({(1, 1): 2})),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(a=ZSETS, b=ZSETS)
def test_pure_function_is_additive(name: str, a: ZSet, b: ZSet) -> None:
    f = UNARY[name]
    fa, fb, fab = f(a), f(b), f(a + b)
    assert isinstance(fa, ZSet) and isinstance(fb, ZSet)
    if name in ("minus-left", "plus-left"):  # affine in its first argument: f(a+b) = f(a) + f(b) - f(0)
        assert fab == fa + fb - f(ZSet())
    else:
        assert fab == fa + fb


@SETTINGS
@given(a=ZSETS, b=ZSETS)
def test_index_with_is_additive(a: ZSet, b: ZSet) -> None:
    total: IndexedZSet = IndexedZSet()
    add_indexed(total, index_with(first, a))
    add_indexed(total, index_with(first, b))
    assert total == index_with(first, a + b)


@SETTINGS
@given(a=ZSETS, b=ZSETS)
def test_minus_and_plus_agree(a: ZSet, b: ZSet) -> None:
    assert minus(a, b) == plus(a, negate(b))
    assert plus(minus(a, b), b) == a
    assert minus(a, a) == ZSet()


# -- upqueries ----------------------------------------------------------------------------------


class Table(Node):
    """A queryable stand-in input: answers from fixed rows, and counts the questions."""

    def __init__(self, rows: ZSet) -> None:
        super().__init__(SCHEMA)
        self.rows = rows
        self.asked: list[tuple[tuple[int, ...], list]] = []

    def upquery(self, cols: tuple[int, ...], keys) -> ZSet:
        self.asked.append((cols, list(keys)))
        if not cols:
            return self.rows
        return self.rows.filter(lambda r: tuple(r[c] for c in cols) in set(keys))


ROWS_AB = ZSet({(0, 1): 1, (1, 1): 2, (1, 2): 1, (2, 0): 1})
ROWS_B = ZSet({(1, 1): 1, (1, 2): 3, (2, 2): 1})


def test_upqueries_pass_through() -> None:
    a, b = Table(ROWS_AB), Table(ROWS_B)
    key1 = [(1,)]
    assert Negate(a).query((0,), key1) == ZSet({(1, 1): -2, (1, 2): -1})
    assert Minus(a, b).query((0,), key1) == ZSet({(1, 1): 1, (1, 2): -2})
    assert Plus(a, b).query((0,), key1) == ZSet({(1, 1): 3, (1, 2): 4})
    assert Filter(a, keep).query((0,), key1) == ZSet({(1, 1): 2, (1, 2): 1})
    assert a.asked[0] == ((0,), key1) and b.asked[0] == ((0,), key1)


def test_inspect_query_does_not_call_the_callback() -> None:
    calls: list[object] = []
    node = Inspect(Table(ROWS_AB), lambda value, time: calls.append(value))
    assert node.query((0,), [(1,)]) == ZSet({(1, 1): 2, (1, 2): 1})
    assert calls == []


def test_map_fn_query_asks_for_everything_then_selects() -> None:
    table = Table(ROWS_AB)
    node = MapFn(table, ("s",), total_of)
    assert node.query((0,), [(2,)]) == ZSet({(2,): 3})  # (1, 1) twice and (2, 0) once
    assert node.query((0,), [(3,), (9,)]) == ZSet({(3,): 1})
    assert node.query((), [()]) == map_zset(total_of, ROWS_AB)
    assert all(asked == ((), [()]) for asked in table.asked)


def test_trace_nodes_are_not_queryable() -> None:
    with pytest.raises(TypeError):
        UntimedTraceAppend(Table(ROWS_AB)).query((), [()])


def test_untimed_trace_append_hydrates_from_its_input() -> None:
    node = UntimedTraceAppend(Table(ROWS_AB))
    node.hydrate()
    assert consolidate(node.trace) == ROWS_AB
    indexed = UntimedTraceAppend(IndexWith(Table(ROWS_AB), first))
    indexed.hydrate()
    assert indexed.trace.consolidate() == index_with(first, ROWS_AB)
