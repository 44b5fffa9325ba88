"""JoinTrace: the bilinear incremental join (§2.9.13), at the root and over nested time."""

from __future__ import annotations

from hypothesis import given, settings
from nested_harness import epochs, run_epochs

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.child import Child
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.join_stream import JoinStream, join_stream
from pomoview.dataflow.operators.join_trace import JoinTrace, incremental_join, join_trace
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.reference.z1 import Z1
from pomoview.dataflow.trace import Trace
from pomoview.dataflow.zset import ZSet

SETTINGS = settings(max_examples=120, deadline=None)
SCHEMA = ("x", "y")


def key(row):  # join a.y = b.x
    return row[1]


def bkey(row):
    return row[0]


def fn(k, left, right):
    return (left[0], k, right[1])


def reference(integrals):
    a = integrals.get("a", ZSet()).index_with(key)
    b = integrals.get("b", ZSet()).index_with(bkey)
    return join_stream(fn, a, b)


@SETTINGS
@given(history=epochs("a", "b"))
def test_incremental_join_at_the_root(history) -> None:
    join = incremental_join(IndexWith(Input("a", SCHEMA), key), IndexWith(Input("b", SCHEMA), bkey), fn)
    run_epochs(Circuit([join]), join, history, reference)


@SETTINGS
@given(history=epochs("a", "b"))
def test_incremental_join_over_nested_time(history) -> None:
    """A Z1 inside the child delays one side by an iteration, so products of a delta with a past
    epoch's entries at a later iteration belong to a later time of this epoch (JoinTrace's due
    outputs); the child's output summed over iterations is still the join's delta."""
    left = IndexWith(Z1(Import(Input("a", SCHEMA))), key)
    right = IndexWith(Import(Input("b", SCHEMA)), bkey)
    child = Child([incremental_join(left, right, fn)])
    out = child.output(0)
    run_epochs(Circuit([out]), out, history, reference)


def test_join_trace_defers_products_to_their_least_upper_bound() -> None:
    trace = Trace()
    trace.insert("k", "past", (0, 3), 1)  # an earlier epoch's entry at iteration 3
    trace.insert("k", "now", (1, 0), 2)
    delta = ZSet({("d",): 1}).index_with(lambda r: "k")
    join = JoinTrace(IndexWith(Input("d"), lambda r: "k"), Input("t"), lambda k, v1, v2: (v1[0], v2))
    out = join.eval([delta, trace], (1, 1))
    assert out == ZSet({("d", "now"): 2})
    assert set(join.pending()) == {(1, 3)}
    assert join.eval([None, trace], (1, 3)) == ZSet({("d", "past"): 1})
    assert not set(join.pending())


def test_join_trace_untimed_form_sums_all_times() -> None:
    trace = Trace()
    trace.insert(1, "a", (0,), 1)
    trace.insert(1, "a", (2,), 1)
    trace.insert(2, "b", (1,), -1)
    delta = ZSet({(1, "x"): 1, (2, "y"): 3}).index_with(lambda r: r[0])
    got = join_trace(lambda k, v1, v2: (k, v1[1], v2), delta, trace)
    assert got == ZSet({(1, "x", "a"): 2, (2, "y", "b"): -3})


def test_join_stream_node_joins_values_of_one_time() -> None:
    a, b = Input("a", SCHEMA), Input("b", SCHEMA)
    join = JoinStream(IndexWith(a, key), IndexWith(b, bkey), fn)
    circuit = Circuit([join])
    assert circuit.step({"a": ZSet({(1, 2): 1})}).get(id(join)) is None  # one side empty: idle
    out = circuit.step({"a": ZSet({(1, 2): 2}), "b": ZSet({(2, 5): -1})})[id(join)]
    assert out == ZSet({(1, 2, 5): -2})  # no memory of the first epoch: not incremental


def test_z1_trace_hides_the_current_time() -> None:
    append = TraceAppend(Input("a", SCHEMA))
    delayed = Z1Trace(append)
    circuit = Circuit([delayed])
    circuit.step({"a": ZSet({(1, 1): 1})})
    values = circuit.step({"a": ZSet({(1, 1): 1, (2, 2): 1})})
    before = values[id(delayed)]
    assert before.times((1, 1)) == {(1,): 1}
    assert before.times((2, 2)) == {}
    assert append.trace.times((1, 1)) == {(1,): 1, (2,): 1}
