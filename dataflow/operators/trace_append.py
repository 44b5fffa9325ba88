"""TraceAppend (PomoFlow §2.9.16): the trace of every delta its input has carried, with times.

Contract: not linear (its output is all of history). State: the trace, which
it owns; at time t it appends the input's delta at t and emits the trace (so
`trace_append(delta, z1_trace(trace))` of the spec is one node here). It runs
at every time, input or not, because its output is the trace. Its trace is
compacted as epochs pass (`Trace.advance_to`; a root Child calls `settle` as soon as
its epoch is over). In a root circuit it hydrates
from the input's whole output at time (0,). Not queryable: read the trace.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pomoview.dataflow.node import FetchRequest, Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import Trace
from pomoview.dataflow.zset import IndexedZSet, ZSet


def trace_append(batch: ZSet[Any] | IndexedZSet[Any, Any], trace: Trace, time: Time) -> Trace:
    trace.append(batch, time)
    return trace


class TraceAppend(Node):
    stateful = True
    # UntimedTraceAppend stamps every delta with one fixed time instead, and never compacts.
    untimed: Time | None = None

    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))
        self.trace = Trace()

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        if self.untimed is None:
            self.trace.advance_to(time[0])
        delta = inputs[0]
        if active(delta):
            assert isinstance(delta, (ZSet, IndexedZSet)), f"{self.describe()} appends (indexed) ZSets"
            self.trace.append(delta, self.untimed or time)
        return self.trace

    def settle(self, epoch: int) -> None:
        """Compacts the trace as of `epoch` (the root's epochs before it are over)."""
        if self.untimed is None:
            self.trace.advance_to(epoch)

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return False

    def hydrate(self) -> list[FetchRequest]:
        parent = self.inputs[0]
        query_indexed = getattr(parent, "query_indexed", None)
        batch = query_indexed((), [()]) if query_indexed is not None else parent.query((), [()])
        self.trace.append(batch, self.untimed or (0,))
        return []

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("a trace is read through its trace, not upqueried")

    def describe(self) -> str:
        return f"{type(self).__name__}({len(self.trace)} entries)"
