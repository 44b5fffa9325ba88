"""JoinTrace (PomoFlow §2.9.13): joins a delta with a trace of the other side's past deltas.

The bilinear incremental join of §2.9.13 is

    incremental_join(a, b) = join_stream(a, b)
                           + join_trace(a, z1_trace(trace_append(b)))
                           + join_trace(flip(join_fun), b, z1_trace(trace_append(a)))

(`incremental_join` below wires exactly that). Over nested time the product of
a delta at time t and a trace entry at time s belongs at their least upper
bound t ∨ s, which is t itself at the root (epochs are totally ordered) but may
be a later iteration of the current epoch inside a child circuit: that part is
kept back and emitted when the child reaches that time.

Contract: bilinear. State: the outputs due at later times of the current
epoch (`pending`); the trace belongs to the TraceAppend that feeds it. The
trace must be full (a missing key here would lose output).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Sequence

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.operators.join_stream import JoinFn, JoinStream, flip
from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.operators.z1_trace import Z1Trace
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time, lub
from pomoview.dataflow.trace import TraceReader
from pomoview.dataflow.zset import IndexedZSet, ZSet


def join_trace(join_fn: JoinFn, delta: IndexedZSet[Hashable, Hashable], trace: TraceReader) -> ZSet[Hashable]:
    """The spec's untimed form: the delta joined with every entry of the trace, whatever its time."""
    out: ZSet[Hashable] = ZSet()
    for key, group in delta.groups():
        values = trace.values(key)
        assert values is not None, f"join against a missing key {key!r}"
        for v1, w1 in group.items():
            for v2, times in values.items():
                out.add(join_fn(key, v1, v2), w1 * sum(times.values()))
    return out


class JoinTrace(Node):
    def __init__(self, delta: Node, trace: Node, join_fn: JoinFn, schema: tuple[str, ...] = ()) -> None:
        super().__init__(schema, (delta, trace))
        self.join_fn = join_fn
        self.due: dict[Time, ZSet[Hashable]] = {}

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        delta, trace = inputs
        out = self.due.pop(time, ZSet())
        if not active(delta):
            return out
        assert isinstance(delta, IndexedZSet), f"{self.describe()} joins an IndexedZSet delta"
        assert isinstance(trace, TraceReader), f"{self.describe()} joins against a trace"
        for key, group in delta.groups():
            values = trace.values(key)
            assert values is not None, f"join against a missing key {key!r}"
            for v2, times in values.items():
                for t2, w2 in times.items():
                    at = lub(time, t2)
                    into = out if at == time else self.due.setdefault(at, ZSet())
                    for v1, w1 in group.items():
                        into.add(self.join_fn(key, v1, v2), w1 * w2)
        return out

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not active(inputs[0]) and time not in self.due

    def pending(self) -> Iterable[Time]:
        return self.due.keys()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("join_trace is one term of an incremental join; upquery the join's inputs")


def incremental_join(left: Node, right: Node, join_fn: JoinFn, schema: tuple[str, ...] = ()) -> Union:
    """§2.9.13's bilinear join of two IndexedZSet delta streams, as a sum of three nodes."""
    left_trace = Z1Trace(TraceAppend(left))
    right_trace = Z1Trace(TraceAppend(right))
    return Union(
        (
            JoinStream(left, right, join_fn, schema),
            JoinTrace(left, right_trace, join_fn, schema),
            JoinTrace(right, left_trace, flip(join_fn), schema),
        )
    )
