"""Import (PomoFlow §2.8.4): brings a stream of the parent circuit into a child circuit.

The child's times refine the parent's: at parent time p the child runs
(p, 0), (p, 1), … In an incremental child the import is δ0: the parent's delta
at p enters at (p, 0) and nothing at later iterations, which is the 2-D delta
of a stream that is constant across iterations. In a non-incremental child
(`Child(mode="iterate")`) the parent's value enters at every iteration.

Contract: linear, stateless; the Child decides what it emits. Not queryable
inside the child (the Child's own inputs are).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


class Import(Node):
    kind = "import"

    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, ())
        self.parent = parent

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        return inputs[0]

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("an import carries 2-D deltas inside its child circuit; query the parent stream")

    def describe(self) -> str:
        return f"Import({'.'.join(map(str, self.parent.global_id))})"
