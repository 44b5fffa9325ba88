"""Union (Plus, PomoFlow §2.9.15): the sum of its inputs' streams.

Contract: linear, stateless. An upquery goes to every input and the answer is
the sum of all of their answers; since the dataflow thread answers an upquery
in one go, every piece describes the same epoch (the union-buffering problem of
partial_state.txt cannot arise).
"""

from __future__ import annotations

from collections.abc import Collection

from ..keyed_state import Key, Row
from ..node import Node
from ..zset import ZSet


class Union(Node):
    def __init__(self, inputs: tuple[Node, ...]) -> None:
        schema = inputs[0].schema
        assert all(len(i.schema) == len(schema) for i in inputs)
        super().__init__(schema, inputs)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        out: ZSet[Row] = ZSet()
        for node in self.inputs:
            out.extend(node.query(cols, keys))
        return out
