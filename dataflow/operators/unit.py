"""Unit: the relation holding one empty tuple, and never changing.

It is the body of a rule with no positive atom (a fact, or a rule whose only
predicate is an aggregate), so that such rules lower like any other.
Contract: linear, stateless; emits no deltas; every upquery answers {()}.
"""

from __future__ import annotations

from collections.abc import Collection

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet


class Unit(Node):
    def __init__(self) -> None:
        super().__init__(())

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return ZSet()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        unit: Row = ()
        return ZSet({unit: 1})
