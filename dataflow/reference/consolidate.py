"""Consolidate (PomoFlow §2.9.2): the sum of every delta in a trace, as one ZSet.

Contract: linear (in the trace). Stateless: it reads its input trace. Weights
of equal (key, value) pairs are summed and zeros dropped; the output element is
the key when the trace holds a plain ZSet (value None), else (key, value). An
upquery reads the trace the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence

from pomoview.dataflow.node import Node, Value, select_keys
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import TraceReader
from pomoview.dataflow.zset import ZSet


def consolidate(trace: TraceReader) -> ZSet[Hashable]:
    out: ZSet[Hashable] = ZSet()
    for key, group in trace.consolidate().groups():
        for value, weight in group.items():
            out.add(key if value is None else (key, value), weight)
    return out


class Consolidate(Node):
    def __init__(self, parent: Node, schema: tuple[str, ...] = ()) -> None:
        super().__init__(schema or parent.schema, (parent,))

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        trace = inputs[0]
        assert isinstance(trace, TraceReader), f"{self.describe()} consolidates a trace"
        return consolidate(trace)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        trace = getattr(self.inputs[0], "trace", None)
        if not isinstance(trace, TraceReader):
            raise TypeError(f"{self.describe()}: the input keeps no trace to read")
        return select_keys(consolidate(trace), cols, set(keys))  # type: ignore[arg-type]
