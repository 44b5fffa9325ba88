"""DistinctTrace (PomoFlow §2.9.11): the delta of distinct over nested time.

Let X be the input's deltas over product-ordered times and S(t) the sum of X
over all times <= t (the input's value at t). The output at t is the delta of
H(S), where H(w) = 1 if w > 0 else 0, i.e. its Möbius inversion over the
lattice: sum over s in {0,1}^d of (-1)^|s| H(S(t - s)). For (epoch e,
iteration i) this is the spec's d1 - d0 with

    w1 = S over (e0 < e, i0 < i), w2 = over (e0 < e, i), w3 = over (e, i0 < i),
    d0 = H(w1 + w2) - H(w1),  d1 = H(w1 + w2 + w3 + w) - H(w1 + w3)

(the spec's `w1 <= =` reads `w1 <= 0`, and its `w1 + w3 + w4` reads
`w1 + w2 + w3 + w`). At the root (one dimension) it is DistinctIncremental.

An element can change at t with no input at t when t is the least upper bound
of two of its earlier times, e.g. a delta at (e, i0) and one at (e0, i) for
e0 < e, i0 < i (the spec's second class). So when an element is examined at t,
it is scheduled again at t ∨ s for every time s of its history; examining it at
such a time schedules the bounds with the rest (which covers any depth).

Contract: not linear. State: the elements scheduled at later times of the
current epoch (`pending`); the history is the trace input, which must hold the
input's deltas before t (`z1_trace(trace_append(input))`) and be full (a
missing key reads as an empty history). At (epoch, iteration) it reads each
candidate's settled code and recent times straight off the trace
(`Trace.histories`) and sums the four corners there; elsewhere each history is
a dict of times (`distinct_delta`).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Sequence
from functools import cache
from typing import Any

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time, lub
from pomoview.dataflow.trace import Times, Trace, TraceReader, nested_layout
from pomoview.dataflow.trace_codes import iteration_pairs
from pomoview.dataflow.zset import ZSet


@cache
def _corner_table(depth: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """For each corner s in {0,1}^depth (a bit mask): its sign, and the masks m with m & s == 0."""
    size = 1 << depth
    return tuple(
        (-1 if bin(s).count("1") % 2 else 1, tuple(m for m in range(size) if m & s == 0)) for s in range(size)
    )


def distinct_delta(history: Times, weight: int, time: Time) -> int:
    """The change of distinct at `time` for one element with `history` before it and `weight` at it.

    A history time h <= time lies below the corner time - s exactly when s is 0 in
    every dimension where h equals time; so the history is summed once into one
    bucket per such "equal dimensions" mask, and each corner adds the buckets it
    admits (2^d buckets and corners, whatever the history's length).
    """
    if not history:
        return 1 if weight > 0 else 0
    depth = len(time)
    buckets = [0] * (1 << depth)
    for t, w in history.items():
        mask = 0
        for k in range(depth):
            if t[k] > time[k]:
                break  # not <= time: below no corner
            if t[k] == time[k]:
                mask |= 1 << k
        else:
            buckets[mask] += w
    out = 0
    for s, (sign, admitted) in enumerate(_corner_table(depth)):
        total = weight if s == 0 else 0
        for m in admitted:
            total += buckets[m]
        if total > 0:
            out += sign
    return out


def distinct_trace(delta: ZSet[Any], trace: TraceReader, time: Time) -> ZSet[Any]:
    """The reference form: examines every element of the delta and of the trace."""
    out: ZSet[Any] = ZSet()
    for element in set(delta.elements()) | set(trace.keys()):
        out.add(element, distinct_delta(trace.times(element), delta.weight(element), time))
    return out


class DistinctTrace(Node):
    def __init__(self, delta: Node, trace: Node) -> None:
        super().__init__(delta.schema, (delta, trace))
        self.scheduled: dict[Time, set[Hashable]] = {}

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        delta, trace = inputs
        assert isinstance(trace, TraceReader), f"{self.describe()} needs the input's trace"
        candidates: set[Any] = self.scheduled.pop(time, set())
        weights: dict[Any, int] = {}
        if active(delta):
            assert isinstance(delta, ZSet), f"{self.describe()} takes a ZSet"
            weights = dict(delta.items())
            candidates.update(weights)
        layout = nested_layout(trace, time)
        if layout is not None:
            out = self._nested(candidates, weights, layout[0], layout[1], time)
        else:
            out = self._general(candidates, weights, trace, time)
        return ZSet.of_weights(out)

    def _general(
        self, candidates: set[Any], weights: dict[Any, int], trace: TraceReader, time: Time
    ) -> dict[Any, int]:
        """Any depth, any trace: each candidate's history as a dict of times."""
        out: dict[Any, int] = {}
        for element in candidates:
            history = trace.times(element)
            change = distinct_delta(history, weights.get(element, 0), time)
            if change:
                out[element] = change
            for earlier in history:
                later = lub(time, earlier)
                if later != time:
                    self.scheduled.setdefault(later, set()).add(element)
        return out

    def _nested(
        self, candidates: set[Any], weights: dict[Any, int], trace: Trace, hidden: Time | None, time: Time
    ) -> dict[Any, int]:
        """`distinct_delta` at (epoch, iteration), read off the trace's two parts: the sums of
        the history below the four corners, with no dict of times built per element."""
        epoch, j = time
        current = trace.recent_epoch == epoch  # else the recent epoch is an earlier one
        hide = hidden[1] if hidden is not None and hidden[0] == trace.recent_epoch else None
        scheduled = self.scheduled
        out: dict[Any, int] = {}
        for element, code, recent in trace.histories(candidates):
            w = weights.get(element, 0)
            w1 = w2 = w3 = 0  # (e < epoch, i < j), (e < epoch, i == j), (e == epoch, i < j)
            if type(code) is int:  # weight 1 at one iteration: the common case
                if code < j:
                    w1 += 1
                elif code == j:
                    w2 += 1
                else:
                    scheduled.setdefault((epoch, code), set()).add(element)
            elif code is not None:
                for i, weight in iteration_pairs(code):
                    if i < j:
                        w1 += weight
                    elif i == j:
                        w2 += weight
                    else:  # below no corner; its bound with `time` is a later iteration
                        scheduled.setdefault((epoch, i), set()).add(element)
            if type(recent) is int and current and recent < j and recent != hide:
                w3 += 1  # weight 1 at an earlier iteration of this epoch: the common case
            elif recent is not None:
                for i, weight in iteration_pairs(recent):
                    if i == hide:
                        continue
                    if i > j:
                        scheduled.setdefault((epoch, i), set()).add(element)
                    elif not current:
                        if i < j:
                            w1 += weight
                        else:
                            w2 += weight
                    elif i < j:
                        w3 += weight
                    else:  # at `time` itself, in a trace that does not hide it
                        w += weight
            # The four corners of `time`, as in `distinct_delta`: H(S(t)) - H(S(t - (1, 0)))
            # - H(S(t - (0, 1))) + H(S(t - (1, 1))).
            change = (w1 + w2 + w3 + w > 0) - (w1 + w2 > 0) - (w1 + w3 > 0) + (w1 > 0)
            if change:
                out[element] = change
        return out

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not active(inputs[0]) and time not in self.scheduled

    def pending(self) -> Iterable[Time]:
        return self.scheduled.keys()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("distinct_trace emits 2-D deltas; query the child circuit's output")
