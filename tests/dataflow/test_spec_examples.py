"""Every worked example of PomoFlow §2.9 (shared/seeds/pomo_flow.txt), checked to its exact output.

Conventions: the spec's ZSet triples {element, timestamp, weight} lose their
timestamp here (our ZSets carry none: every delta of a step belongs to the
step's time), so `{1, 0, 2}` is `ZSet({1: 2})`. Elixir atoms such as `:a`
become the strings "a". Trace 4-tuples {key, value, time, weight} keep their
time, as `Trace.insert(key, value, (time,), weight)`.

Aggregate (§2.9.1) is tested with the aggregates (test_aggregates.py). Z1,
Z1 Trace, Trace Append and Untimed Trace Append (§2.9.9, 2.9.10, 2.9.16,
2.9.17) have no example in the spec: see test_linear_operators.py.
"""

from __future__ import annotations

from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.distinct_incremental import distinct_incremental
from pomoview.dataflow.operators.distinct_trace import DistinctTrace, distinct_trace
from pomoview.dataflow.operators.filter import filter_zset
from pomoview.dataflow.operators.index_with import index_with
from pomoview.dataflow.operators.join_stream import join_stream
from pomoview.dataflow.operators.join_trace import join_trace
from pomoview.dataflow.operators.map import map_zset
from pomoview.dataflow.operators.minus import minus
from pomoview.dataflow.operators.trace_append import trace_append
from pomoview.dataflow.reference.consolidate import consolidate
from pomoview.dataflow.reference.distinct import distinct
from pomoview.dataflow.reference.inspect import inspect
from pomoview.dataflow.reference.negate import negate
from pomoview.dataflow.reference.plus import plus
from pomoview.dataflow.trace import Trace
from pomoview.dataflow.zset import IndexedZSet, ZSet


def indexed(pairs: list[tuple[object, object, int]]) -> IndexedZSet:
    """An IndexedZSet from (key, value, weight) triples (weights of equal pairs add)."""
    out: IndexedZSet = IndexedZSet()
    for key, value, weight in pairs:
        out.add(key, value, weight)
    return out


def trace_of(entries: list[tuple[object, object, int, int]]) -> Trace:
    """A trace from the spec's 4-tuples {key, value, time, weight} at root times (time,)."""
    trace = Trace()
    for key, value, time, weight in entries:
        trace.insert(key, value, (time,), weight)
    return trace


# §2.9.2 ---------------------------------------------------------------------------------


def test_consolidate() -> None:
    # The spec's listing has two typos ("}." for "}," and "{1, 4, 0 -1}", "{2, 4, 0 1}"
    # missing a comma); read as the 4-tuples they evidently are.
    trace = trace_of(
        [
            (0, 0, 0, 1),
            (0, 0, 0, -1),
            (0, 1, 0, 1),
            (0, 1, 0, 1),
            (1, 2, 0, 2),
            (1, 3, 0, 1),
            (1, 3, 0, -1),
            (1, 4, 0, -1),
            (2, 2, 0, 1),
            (2, 4, 0, 1),
        ]
    )
    # {{0, 1}, nil, 2} ... : the elements are (key, value) pairs with no time.
    assert consolidate(trace) == ZSet({(0, 1): 2, (1, 2): 2, (1, 4): -1, (2, 2): 1, (2, 4): 1})


# §2.9.3 ---------------------------------------------------------------------------------


def test_distinct() -> None:
    # {3, 0, 0} has weight 0: a ZSet stores no zero weight, so it is simply absent.
    assert distinct(ZSet({0: 1, 1: 2, 2: -1, 3: 0})) == ZSet({0: 1, 1: 1})


# §2.9.4 ---------------------------------------------------------------------------------


def test_filter() -> None:
    # {2, 1, -3} is at timestamp 1 in the spec; the time is dropped (see the module docstring).
    assert filter_zset(lambda x: x >= 1, ZSet({0: 1, 1: 2, 2: -3})) == ZSet({1: 2, 2: -3})


# §2.9.5 ---------------------------------------------------------------------------------


def test_index_with() -> None:
    def key_function(edge: tuple[int, int, int]) -> int:
        src, _dst, _cost = edge
        return src

    got = index_with(key_function, ZSet({(0, 1, 1): 1, (1, 2, 1): 1, (1, 3, 2): -1}))
    assert got == indexed([(0, (0, 1, 1), 1), (1, (1, 2, 1), 1), (1, (1, 3, 2), -1)])
    group = got.group(1)
    assert group is not None and dict(group.items()) == {(1, 2, 1): 1, (1, 3, 2): -1}


# §2.9.6 ---------------------------------------------------------------------------------


def test_inspect() -> None:
    seen: list[ZSet] = []
    zset = ZSet({0: 1, 1: 1})
    out = inspect(seen.append, zset)
    assert out == ZSet({0: 1, 1: 1})
    assert out is zset  # returned unchanged, not copied
    assert seen == [ZSet({0: 1, 1: 1})]  # "Also printing out [{0, 1, 1}, {1, 1, 1}]"


# §2.9.7 ---------------------------------------------------------------------------------

# The spec's Map example is a copy of its Filter example (it calls `filter` with a
# predicate). We test the evident intent: a map applies a function to every element
# and keeps the weights, adding those of elements that collide.


def test_map_times_ten() -> None:
    assert map_zset(lambda x: x * 10, ZSet({0: 1, 1: 2, 2: -3})) == ZSet({0: 1, 10: 2, 20: -3})


def test_map_with_the_filter_predicate() -> None:
    # The spec's predicate used as a map to booleans: 1 and 2 both map to True,
    # so their weights 2 and -3 add up to -1.
    assert map_zset(lambda x: x >= 1, ZSet({0: 1, 1: 2, 2: -3})) == ZSet({False: 1, True: -1})


# §2.9.8 ---------------------------------------------------------------------------------


def test_negate() -> None:
    assert negate(ZSet({0: 1, 1: -1, 2: -2})) == ZSet({0: -1, 1: 1, 2: 2})


# §2.9.11 --------------------------------------------------------------------------------

# The spec's routine has typos: "w1 <= =" reads `w1 <= 0`, and "w1 + w3 + w4 <= 0" reads
# `w1 + w2 + w3 + w <= 0`. Its sentence "if that element does not appear in the trace,
# it is returned in the ZSet with weight 1" is contradicted by its own example: element 4
# (weight -1 at (1, 1), absent from t11) is not returned, and neither is element 3 at
# (0, 0) (weight -1, absent from t00). We test the example, which is the Möbius
# inversion that distinct_trace computes.

B00 = ZSet({0: 1, 2: 1, 3: -1})
B01 = ZSet({5: 1})
B10 = ZSet({5: 1})
B11 = ZSet({0: 1, 1: 1, 2: -1, 3: 1, 4: -1})
BATCHES = [((0, 0), B00), ((0, 1), B01), ((1, 0), B10), ((1, 1), B11)]


def spec_traces() -> list[Trace]:
    """t00 .. t11: t00 is empty and each next one appends the previous time's batch."""
    traces = []
    for n in range(len(BATCHES)):
        trace = Trace()
        for time, batch in BATCHES[:n]:
            trace = trace_append(batch, trace, time)
        traces.append(trace)
    return traces


DISTINCT_TRACE_OUT = [
    ZSet({0: 1, 2: 1}),  # at (0, 0)
    ZSet({5: 1}),  # at (0, 1)
    ZSet({5: 1}),  # at (1, 0)
    ZSet({1: 1, 2: -1, 5: -1}),  # at (1, 1)
]


def test_distinct_trace() -> None:
    t00, t01, t10, t11 = spec_traces()
    assert len(t00) == 0
    assert list(t11.cursor()) == [
        (0, None, (0, 0), 1),
        (2, None, (0, 0), 1),
        (3, None, (0, 0), -1),
        (5, None, (0, 1), 1),
        (5, None, (1, 0), 1),
    ]
    assert distinct_trace(B00, t00, (0, 0)) == DISTINCT_TRACE_OUT[0]
    assert distinct_trace(B01, t01, (0, 1)) == DISTINCT_TRACE_OUT[1]
    assert distinct_trace(B10, t10, (1, 0)) == DISTINCT_TRACE_OUT[2]
    assert distinct_trace(B11, t11, (1, 1)) == DISTINCT_TRACE_OUT[3]


def test_distinct_trace_node_matches_the_example() -> None:
    # The node examines only the delta and what it scheduled: element 5 is not in
    # B11, but its deltas at (0, 1) and (1, 0) schedule it at their lub (1, 1).
    node = DistinctTrace(_Stub(), _Stub())
    for (time, batch), trace, want in zip(BATCHES, spec_traces(), DISTINCT_TRACE_OUT, strict=True):
        assert node.eval([batch, trace], time) == want, time
    assert not node.scheduled


class _Stub(Node):
    """Stands for the node's inputs: eval is handed their values directly."""

    def __init__(self) -> None:
        super().__init__(())


# §2.9.12 --------------------------------------------------------------------------------


def join_fun(key: object, v1: object, v2: object) -> object:
    return (key, (v1, v2))


def test_join_stream() -> None:
    a = indexed([("a", 1, 1), ("b", 2, 2), ("c", 2, 1)])
    b = indexed([("a", 1, 1), ("b", 3, 1), ("b", 4, -1)])
    want = ZSet({("a", (1, 1)): 1, ("b", (2, 3)): 2, ("b", (2, 4)): -2})
    assert join_stream(join_fun, a, b) == want


# §2.9.13 --------------------------------------------------------------------------------


def test_join_trace() -> None:
    # The spec's join_fun returns {key, {v1, v2}} but its expected output tuples are flat,
    # {:a, 1, 1}; we use a join function returning (key, v1, v2) to match the output.
    def flat(key: object, v1: object, v2: object) -> object:
        return (key, v1, v2)

    zset = indexed([("a", 0, 1), ("a", 0, -1), ("a", 1, 1), ("b", 2, 2), ("c", 2, 1)])
    trace = trace_of([("a", 1, 0, 1), ("b", -3, 0, -1), ("b", 3, 0, 1), ("b", 4, 0, -1), ("c", 4, 0, 1)])
    want = ZSet({("a", 1, 1): 1, ("b", 2, -3): -2, ("b", 2, 3): 2, ("b", 2, 4): -2, ("c", 2, 4): 1})
    assert join_trace(flat, zset, trace) == want
    # with the spec's nested join_fun the same pairs come out nested
    assert join_trace(join_fun, zset, trace) == ZSet({(k, (v1, v2)): w for (k, v1, v2), w in want.items()})


# §2.9.14 --------------------------------------------------------------------------------

A = ZSet({0: 1, 1: 1, 2: 2, 3: 1})
B = ZSet({0: 1, 1: -1, 2: 1})


def test_minus() -> None:
    # a - b = {0: 0, 1: 2, 2: 1, 3: 1}; element 0 reaches weight 0 and is discarded.
    assert minus(A, B) == ZSet({1: 2, 2: 1, 3: 1})


# §2.9.15 --------------------------------------------------------------------------------


def test_plus() -> None:
    # a + b = {0: 2, 1: 0, 2: 3, 3: 1}; element 1 reaches weight 0 and is discarded.
    assert plus(A, B) == ZSet({0: 2, 2: 3, 3: 1})


# §2.9.18 --------------------------------------------------------------------------------

# The spec names this call `distinct(batch, trace)`. Ours is
# `distinct_incremental(batch, history)`, where the history is the trace consolidated
# into a ZSet: at the root only the sum of the past matters. The spec's trace entries
# here are triples {element, time, weight}, i.e. a trace of a plain ZSet (value nil).

BATCH = ZSet({0: 2, 2: 1, 3: -1})


def history(entries: list[tuple[int, int, int]]) -> ZSet:
    trace = Trace()
    for element, time, weight in entries:
        trace.insert(element, None, (time,), weight)
    return consolidate(trace)


def test_distinct_incremental_first_call() -> None:
    assert distinct_incremental(BATCH, history([(0, 0, 1)])) == ZSet({2: 1})


def test_distinct_incremental_second_call() -> None:
    assert distinct_incremental(BATCH, history([(2, 1, 1), (3, 1, 1)])) == ZSet({0: 1, 3: -1})


def test_distinct_incremental_third_call() -> None:
    assert distinct_incremental(BATCH, history([(0, 2, -1)])) == ZSet({0: 1, 2: 1})
