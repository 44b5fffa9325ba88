"""Filter: keeps the rows a pure predicate accepts (PomoFlow §2.9.4).

Contract: linear, stateless; a kept element keeps its weight. An upquery
passes through unchanged and the answer is filtered the same way (a missing
key is the input's business). `filter_zset` is the spec's `filter(predicate,
zset)` on one value.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Hashable
from typing import Any, TypeVar

from pomoview.dataflow.node import Node
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Upquery, rows
from pomoview.dataflow.zset import ZSet

E = TypeVar("E", bound=Hashable)

# The comparisons of rule bodies, by their operator: a Filter's predicates and a WcojJoin's
# constraints are made from these.
COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def filter_zset(predicate: Callable[[E], bool], zset: ZSet[E]) -> ZSet[E]:
    """The elements of `zset` that `predicate` accepts, with their weights."""
    return zset.filter(predicate)


class Filter(Node):
    def __init__(self, parent: Node, predicate: Callable[[Row], bool], label: str = "") -> None:
        super().__init__(parent.schema, (parent,))
        self.predicate = predicate
        self.label = label

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return filter_zset(self.predicate, delta)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        return filter_zset(self.predicate, (yield rows(self.inputs[0], cols, keys)))

    def describe(self) -> str:
        return f"Filter({self.label})"
