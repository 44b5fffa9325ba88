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
epoch (`pending`, summed per row); the trace belongs to the TraceAppend that
feeds it. The trace must be full (a missing key here would lose output: it is
asserted). A delta's key is read once, both parts of the trace together
(`Trace.settled_values`, `recent_values`), not a dict of times per value.
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
from pomoview.dataflow.trace import Trace, TraceReader, nested_layout
from pomoview.dataflow.trace_codes import iteration_pairs
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
        self.due: dict[Time, dict[Hashable, int]] = {}  # summed, zeros dropped when emitted

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        delta, trace = inputs
        out = self.due.pop(time, None)
        if out is None:
            out = {}
        if active(delta):
            assert isinstance(delta, IndexedZSet), f"{self.describe()} joins an IndexedZSet delta"
            assert isinstance(trace, TraceReader), f"{self.describe()} joins against a trace"
            layout = nested_layout(trace, time)
            if layout is not None:
                self._nested(delta, layout[0], layout[1], time, out)
            else:
                self._general(delta, trace, time, out)
        return ZSet.of_weights({row: w for row, w in out.items() if w})

    def _at(self, at: Time, time: Time, out: dict[Hashable, int]) -> dict[Hashable, int]:
        """Where output due at `at` goes: `out` when it is now, else the pending sums."""
        if at == time:
            return out
        due = self.due.get(at)
        if due is None:
            due = self.due[at] = {}
        return due

    def _general(
        self, delta: IndexedZSet[Hashable, Hashable], trace: TraceReader, time: Time, out: dict[Hashable, int]
    ) -> None:
        """Any depth, any trace: each key's values as dicts of times."""
        for key, group in delta.groups():
            values = trace.values(key)
            assert values is not None, f"join against a missing key {key!r}"
            items = list(group.items())
            for v2, times in values.items():
                for t2, w2 in times.items():
                    self._emit(key, items, v2, w2, self._at(lub(time, t2), time, out))

    def _nested(
        self,
        delta: IndexedZSet[Hashable, Hashable],
        trace: Trace,
        hidden: Time | None,
        time: Time,
        out: dict[Hashable, int],
    ) -> None:
        """At (epoch, iteration), read off the trace's two parts, both below `time`'s epoch or
        at it: a value's iteration alone says when its products are due (settled and recent
        alike; in recent, the hidden iteration is skipped)."""
        epoch, j = time
        hide = hidden[1] if hidden is not None and hidden[0] == trace.recent_epoch else None
        emit = self._emit
        for key, group in delta.groups():
            assert trace.is_present(key), f"join against a missing key {key!r}"
            items = list(group.items())
            for codes, skip in ((trace.settled_values(key), None), (trace.recent_values(key), hide)):
                for v2, code in codes.items():
                    if type(code) is int:  # weight 1 at one iteration: the common case
                        if code != skip:
                            emit(key, items, v2, 1, out if code <= j else self._at((epoch, code), time, out))
                        continue
                    for i, w2 in iteration_pairs(code):
                        if i != skip:
                            emit(key, items, v2, w2, out if i <= j else self._at((epoch, i), time, out))

    def _emit(
        self,
        key: Hashable,
        items: list[tuple[Hashable, int]],
        v2: Hashable,
        w2: int,
        into: dict[Hashable, int],
    ) -> None:
        fn, get = self.join_fn, into.get
        for v1, w1 in items:
            row = fn(key, v1, v2)
            into[row] = get(row, 0) + w1 * w2

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
