"""Union (Plus, PomoFlow §2.9.15): the sum of its inputs' streams.

Contract: linear, stateless. An upquery goes to every input, as branches of its own
(`ask_all`), and the answer is the sum of all of their answers. A parent that misses does
not stop the others, so one round names the fetches of every parent and they run
together; the union answers, and the state below fills, only once every parent answered
at the same token (upquery.py restarts the union when an epoch or an eviction came between
its parents' answers), so every piece describes the same epoch and the writes applied
between rounds are in the parents' answers exactly once (the union-buffering problem of
partial_state.txt cannot arise). Evictions pass through.
"""

from __future__ import annotations

from collections.abc import Collection

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, ask_all, rows
from pomoview.dataflow.zset import ZSet


class Union(Node):
    def __init__(self, inputs: tuple[Node, ...]) -> None:
        schema = inputs[0].schema
        assert all(len(i.schema) == len(schema) for i in inputs)
        super().__init__(schema, inputs)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        out: ZSet[Row] = ZSet()
        for answer in (yield from ask_all([rows(node, cols, keys) for node in self.inputs])):
            out.extend(answer)
        return out
