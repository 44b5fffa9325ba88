"""Distinct (PomoFlow §2.9.3): the elements of positive weight, each with weight 1.

Contract: not linear; stateless: it applies to the value its input carries at
each time, so it is the non-incremental operator (the reference that
DistinctIncremental and DistinctTrace are checked against, and the set
operator of non-incremental circuits). An upquery applies it to the input's
answer.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.upquery import Upquery, rows
from pomoview.dataflow.zset import E, ZSet


def distinct(zset: ZSet[E]) -> ZSet[E]:
    return zset.distinct()


class Distinct(Node):
    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        value = inputs[0]
        if not active(value):
            return ZSet()
        assert isinstance(value, ZSet), f"{self.describe()} takes a ZSet"
        return distinct(value)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        return distinct((yield rows(self.inputs[0], cols, keys)))
