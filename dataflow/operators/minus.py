"""Minus (PomoFlow §2.9.14): the first ZSet less the second, weight by weight.

Contract: linear (in both inputs), stateless. Weights of equal elements are
subtracted and elements left with weight zero dropped. Port 0's delta passes
as it is and port 1's is negated, so `Minus(a, a)` emits nothing. An upquery
asks both inputs for the same columns and keys and answers `a - b`; a missing
key is each input's business (a partial input fills it).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import TypeVar

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, ask_all, rows
from pomoview.dataflow.zset import ZSet

E = TypeVar("E", bound=Hashable)


def minus(a: ZSet[E], b: ZSet[E]) -> ZSet[E]:
    return a - b


class Minus(Node):
    def __init__(self, a: Node, b: Node) -> None:
        assert len(a.schema) == len(b.schema), (a.schema, b.schema)
        super().__init__(a.schema, (a, b))

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta if port == 0 else -delta

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        a, b = self.inputs
        first, second = yield from ask_all([rows(a, cols, keys), rows(b, cols, keys)])
        return minus(first, second)
