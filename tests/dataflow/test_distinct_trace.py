"""DistinctTrace: the delta of distinct over nested time (§2.9.11), against Distinct of the integral."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nested_harness import epochs, run_epochs

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.child import Child
from pomoview.dataflow.operators.distinct_trace import DistinctTrace, distinct_delta, distinct_trace
from pomoview.dataflow.operators.import_stream import Import
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.reference.distinct import distinct
from pomoview.dataflow.reference.z1 import Z1
from pomoview.dataflow.time import corners, leq
from pomoview.dataflow.trace import Trace
from pomoview.dataflow.zset import ZSet

SETTINGS = settings(max_examples=150, deadline=None)
SCHEMA = ("x", "y")


def distinct_of(node):
    return DistinctTrace(node, Z1Trace(TraceAppend(node)))


def reference(integrals):
    return distinct(integrals.get("a", ZSet()) + integrals.get("b", ZSet()))


@SETTINGS
@given(history=epochs("a", "b"))
def test_at_the_root_it_is_distinct_incremental(history) -> None:
    node = distinct_of(Union((Input("a", SCHEMA), Input("b", SCHEMA))))
    run_epochs(Circuit([node]), node, history, reference)


@SETTINGS
@given(history=epochs("a", "b"))
def test_over_nested_time(history) -> None:
    """b enters one iteration late: an element's deltas at (e, 0) and at (e0, 1) from an earlier
    epoch meet at (e, 1), where distinct may change with no input (the spec's second class)."""
    body = Union((Import(Input("a", SCHEMA)), Z1(Z1(Import(Input("b", SCHEMA))))))
    child = Child([distinct_of(body)])
    out = child.output(0)
    run_epochs(Circuit([out]), out, history, reference)


@settings(max_examples=300, deadline=None)
@given(
    history=st.dictionaries(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)), st.integers(-2, 2), max_size=8
    ),
    weight=st.integers(-2, 2),
    time=st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2)),
)
def test_delta_is_the_mobius_inversion_of_distinct(history, weight, time) -> None:
    """The bucketed computation equals the definition: sum of (-1)^|s| H(S(t - s)) over corners."""
    history = {t: w for t, w in history.items() if t != time and w}

    def positive_at(corner):
        total = sum(w for t, w in history.items() if leq(t, corner)) + (weight if corner == time else 0)
        return 1 if total > 0 else 0

    expected = sum(sign * positive_at(c) for c, sign in corners(time))
    assert distinct_delta(history, weight, time) == expected


def test_reference_form_examines_every_element() -> None:
    trace = Trace()
    trace.insert("x", None, (0, 1), 1)
    trace.insert("x", None, (1, 0), 1)
    # no delta for "x" at (1, 1), yet its distinct count falls there
    assert distinct_trace(ZSet(), trace, (1, 1)) == ZSet({"x": -1})
