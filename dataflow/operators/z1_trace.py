"""Z1Trace (PomoFlow §2.9.9): the input trace as it was at the previous time.

Contract: linear. Stateless here: every entry of a trace is appended at the
time that produced it, so the previous time's trace is the current one with the
entries at the current time hidden (`TraceBefore`), and no copy is made.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import Trace, TraceBefore
from pomoview.dataflow.zset import ZSet


def z1_trace(trace: Trace, time: Time) -> TraceBefore:
    return TraceBefore(trace, time)


class Z1Trace(Node):
    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        trace = inputs[0]
        assert isinstance(trace, Trace), f"{self.describe()} delays a trace"
        return z1_trace(trace, time)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("a trace is read through its trace, not upqueried")
