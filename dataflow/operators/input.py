"""Input (PomoFlow §2.8.6, Source node): emits the delta the circuit is given for a named source.

Contract: linear, stateless; emits exactly what `Circuit.step` passes for its
name (a ZSet, or an IndexedZSet), and nothing when there is none. It keeps no
copy of the relation, so it cannot answer upqueries; a SourceIndex is the
source node that does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


class Input(Node):
    kind = "source"

    def __init__(self, source: str, schema: tuple[str, ...] = ()) -> None:
        super().__init__(schema, ())
        self.source = source

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        return inputs[0]

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError(f"input {self.source!r} keeps no state to upquery; use a SourceIndex")

    def describe(self) -> str:
        return f"Input({self.source})"
