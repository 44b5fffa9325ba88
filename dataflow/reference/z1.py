"""Z1 (PomoFlow §2.9.10): the stream delayed by one time of its circuit.

Contract: linear. State: the value it received at the previous time, which it
emits now (nothing at the first time). Inside a child circuit "one time" is one
iteration; in the root circuit it is one epoch. A Z1 holding a value is busy:
its circuit cannot be at rest until it has emitted it. Not queryable (its
output is the past, not a relation).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


class Z1(Node):
    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))
        self.held: Value | None = None

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        out, self.held = self.held, inputs[0]
        return out

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not active(inputs[0]) and not active(self.held)

    def busy(self) -> bool:
        return active(self.held)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("Z1 carries the previous time's delta, which is not a relation to upquery")
