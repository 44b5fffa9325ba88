"""Filter: keeps the rows a pure predicate accepts (PomoFlow §2.9.4).

Contract: linear, stateless. An upquery passes through unchanged and the
answer is filtered the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ..keyed_state import Key, Row
from ..node import Node
from ..zset import ZSet


class Filter(Node):
    def __init__(self, parent: Node, predicate: Callable[[Row], bool], label: str = "") -> None:
        super().__init__(parent.schema, (parent,))
        self.predicate = predicate
        self.label = label

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return delta.filter(self.predicate)

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        return self.inputs[0].query(cols, keys).filter(self.predicate)

    def describe(self) -> str:
        return f"Filter({self.label})"
