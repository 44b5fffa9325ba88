"""Feedback (PomoFlow §2.8.3): a Z1 whose input comes from later in the circuit.

It closes a cycle: `delayed` (set by `connect`) is computed after the nodes
that read the feedback, and its output at time t is what `delayed` produced at
the time before (nothing at the first time). The circuit leaves this edge out
of its topological order and latches the delayed node's output after every
pass (`latch`).

Contract: linear. State: the latched value, and the one before it, so that a
non-incremental loop can tell when it has stopped changing (`stable`). A
feedback holding a value is busy. Not queryable.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


def _same(a: Value | None, b: Value | None) -> bool:
    if not active(a) or not active(b):
        return active(a) == active(b)
    return a == b


class Feedback(Node):
    kind = "feedback"

    def __init__(self, schema: tuple[str, ...]) -> None:
        super().__init__(schema, ())
        self.delayed: Node | None = None
        self.held: Value | None = None
        self.previous: Value | None = None

    def connect(self, node: Node) -> None:
        """Makes this feedback delay `node`'s output (a node computed later in the circuit)."""
        assert self.delayed is None, "a feedback delays one stream"
        assert len(node.schema) == len(self.schema), (node.schema, self.schema)
        self.delayed = node

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        return self.held

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not active(self.held)

    def latch(self, value: Value | None) -> None:
        self.previous, self.held = self.held, value

    def busy(self) -> bool:
        return active(self.held)

    def stable(self) -> bool:
        """Whether the delayed stream carried the same value at the last two times."""
        return _same(self.held, self.previous)

    def reset(self) -> None:
        self.held = self.previous = None

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("a feedback carries the previous iteration's stream, which is not queryable")

    def describe(self) -> str:
        target = self.delayed.local_id if self.delayed is not None else "?"
        return f"Feedback(from {target})"
