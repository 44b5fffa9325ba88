"""Recursive circuits: the incremental form against a from-scratch recomputation at every epoch.

The incremental circuit gets each epoch's edge changes; the reference gets the
whole current edge set every epoch and runs the non-incremental operators to a
fixed point. The accumulated incremental output must equal the reference's
value after every epoch, for random insert and delete sequences; plain Python
fixpoints check the reference in turn.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recursive_circuits import (
    Build,
    closure_of_reversed_closure,
    even_odd_paths,
    python_closure,
    transitive_closure,
)

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.child import Child, FixedPointNotReached
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.map import MapFn
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.zset import ZSet

Edge = tuple[int, int]
NODES = 5

edge = st.tuples(st.integers(0, NODES - 1), st.integers(0, NODES - 1))
# Each epoch toggles some edges: present ones are deleted, absent ones inserted.
histories = st.lists(st.lists(edge, min_size=1, max_size=6), min_size=1, max_size=10)


def run(build: Build, source: str, history: list[list[Edge]], check=None) -> None:
    circuit, outputs = build(True)
    reference, ref_outputs = build(False)
    totals = [ZSet() for _ in outputs]
    present: set[Edge] = set()
    for toggles in history:
        delta: ZSet = ZSet()
        for e in dict.fromkeys(toggles):
            delta.add(e, -1 if e in present else 1)
            present ^= {e}
        values = circuit.step({source: delta})
        ref_values = reference.step({source: ZSet({e: 1 for e in present})})
        for total, out, ref_out in zip(totals, outputs, ref_outputs, strict=True):
            total.extend(values.get(id(out)) or ZSet())
            want = ref_values.get(id(ref_out)) or ZSet()
            assert total == want, (sorted(present), total, want)
        if check is not None:
            check(present, [t.positive() for t in totals])


def check_closure(present: set[Edge], outputs: list[list[Edge]]) -> None:
    assert set(outputs[0]) == python_closure(present)


@settings(max_examples=150, deadline=None)
@given(history=histories)
def test_transitive_closure(history: list[list[Edge]]) -> None:
    run(transitive_closure, "edge", history, check_closure)


def check_even_odd(present: set[Edge], outputs: list[list[Edge]]) -> None:
    odd_set: set[Edge] = set(present)
    even: set[Edge] = set()
    while True:  # plain fixpoint over the two rules
        new_even = {(x, z) for (x, y) in present for (y2, z) in odd_set if y == y2}
        new_odd = set(present) | {(x, z) for (x, y) in present for (y2, z) in new_even if y == y2}
        if new_even == even and new_odd == odd_set:
            break
        even, odd_set = new_even, new_odd
    assert set(outputs[0]) == odd_set
    assert set(outputs[1]) == even


@settings(max_examples=150, deadline=None)
@given(history=histories)
def test_mutually_recursive_even_odd_paths(history: list[list[Edge]]) -> None:
    run(even_odd_paths, "edge", history, check_even_odd)


def check_nested(present: set[Edge], outputs: list[list[Edge]]) -> None:
    p: set[Edge] = set()
    while True:
        new = present | {(y, x) for (x, y) in python_closure(p)}
        if new == p:
            break
        p = new
    assert set(outputs[0]) == p


@settings(max_examples=60, deadline=None)
@given(history=st.lists(st.lists(edge, min_size=1, max_size=4), min_size=1, max_size=6))
def test_child_inside_child(history: list[list[Edge]]) -> None:
    """Times of three components (epoch, outer iteration, inner iteration)."""
    run(closure_of_reversed_closure, "base", history, check_nested)


def test_long_chain_then_cut() -> None:
    """A path of 30 edges: the closure needs 30 iterations; cutting the middle retracts 225 pairs."""
    circuit, (out,) = transitive_closure(True)
    chain = ZSet({(i, i + 1): 1 for i in range(30)})
    total = ZSet(dict(circuit.step({"edge": chain})[id(out)].items()))
    assert len(total) == 31 * 30 // 2
    child = out.inputs[0]
    assert isinstance(child, Child) and child.iterations >= 30
    delta = circuit.step({"edge": ZSet({(15, 16): -1})})[id(out)]
    assert isinstance(delta, ZSet)
    assert all(w == -1 for _, w in delta.items()) and len(delta) == 16 * 15
    total.extend(delta)
    assert set(total.positive()) == python_closure({(i, i + 1) for i in range(30)} - {(15, 16)})


def test_node_ids_are_paths_of_local_ids() -> None:
    circuit, (out,) = closure_of_reversed_closure(True)
    child = out.inputs[0]
    assert isinstance(child, Child)
    assert [n.local_id for n in circuit.nodes] == list(range(len(circuit.nodes)))
    assert child.global_id == (child.local_id,)
    inner_children = [n for n in child.circuit.nodes if isinstance(n, Child)]
    assert len(inner_children) == 1
    for node in child.circuit.nodes:
        assert node.global_id == child.global_id + (node.local_id,)
    for node in inner_children[0].circuit.nodes:
        assert node.global_id[:2] == inner_children[0].global_id
    ids = [n.global_id for n in circuit.nodes + child.circuit.nodes + inner_children[0].circuit.nodes]
    assert len(set(ids)) == len(ids)
    kinds = {n.kind for n in child.circuit.nodes}
    assert {"import", "feedback", "child", "operator"} <= kinds
    assert {n.kind for n in circuit.nodes} == {"source", "child", "operator"}


def test_a_loop_without_fixed_point_is_reported() -> None:
    counter = Feedback(("n",))
    step = Union((Import(Input("seed", ("n",))), MapFn(counter, ("n",), lambda row: (row[0] + 1,))))
    counter.connect(step)
    child = Child([step], max_iterations=50)
    circuit = Circuit([child.output(0)])
    with pytest.raises(FixedPointNotReached, match="child"):
        circuit.step({"seed": ZSet({(0,): 1})})


@settings(max_examples=60, deadline=None)
@given(first=st.lists(edge, max_size=8), history=histories)
def test_child_hydrates_from_full_source_state(first: list[Edge], history: list[list[Edge]]) -> None:
    """Built over a store that already holds edges: hydration runs them through the child at
    epoch 0, and the child's output answers a whole-relation upquery from then on."""
    from dataflow_harness import Driver, Store
    from recursive_circuits import Builder, closure_child

    store = Store({"edge": ("x", "y")})
    store.apply({"edge": {e: 1 for e in first}})
    child = closure_child(Builder(True), store.index("edge", (), False))
    reference = lambda s: ZSet({p: 1 for p in python_closure(s.data["edge"])})  # noqa: E731
    driver = Driver(store, child.output(0), reference)
    driver.check()
    for toggles in history:
        ops = {e: (-1 if e in store.data["edge"] else 1) for e in dict.fromkeys(toggles)}
        driver.step({"edge": ops})
        driver.check()
