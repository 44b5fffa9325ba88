"""Negate (PomoFlow §2.9.8): every weight of a ZSet negated.

Contract: linear, stateless. An element of weight w comes out with weight -w
(no weight is zero, so no element appears or disappears). An upquery asks the
input for the same columns and keys and negates the answer, so a missing key
is the input's business (a partial input fills it).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import TypeVar

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, rows
from pomoview.dataflow.zset import ZSet

E = TypeVar("E", bound=Hashable)


def negate(zset: ZSet[E]) -> ZSet[E]:
    return -zset


class Negate(Node):
    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return negate(delta)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        return negate((yield rows(self.inputs[0], cols, keys)))
