"""IndexWith (PomoFlow §2.9.5): groups a ZSet's elements under a key function, giving an IndexedZSet.

Contract: linear, stateless. Each element keeps its weight and is filed under
`key_fn(element)` with itself as the value. An upquery is passed to the input
unchanged (the rows are the same); `query_indexed` indexes the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.upquery import Upquery, indexed, rows, run
from pomoview.dataflow.zset import IndexedZSet, ZSet

KeyFn = Callable[[Row], Hashable]


def index_with(key_fn: KeyFn, zset: ZSet[Row]) -> IndexedZSet[Hashable, Row]:
    return zset.index_with(key_fn)


class IndexWith(Node):
    def __init__(self, parent: Node, key_fn: KeyFn, label: str = "") -> None:
        super().__init__(parent.schema, (parent,))
        self.key_fn = key_fn
        self.label = label

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        (delta,) = inputs
        if not active(delta):
            return IndexedZSet()
        assert isinstance(delta, ZSet), f"{self.describe()} takes a ZSet"
        return index_with(self.key_fn, delta)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        return (yield rows(self.inputs[0], cols, keys))

    def query_indexed(self, cols: tuple[int, ...], keys: Collection[Key]) -> IndexedZSet[Hashable, Row]:
        answer: IndexedZSet[Hashable, Row] = run(indexed(self, cols, keys))
        return answer

    def upquery_indexed(
        self, cols: tuple[int, ...], keys: Collection[Key]
    ) -> Upquery[IndexedZSet[Hashable, Row]]:
        return index_with(self.key_fn, (yield rows(self.inputs[0], cols, keys)))

    def describe(self) -> str:
        return f"IndexWith({self.label})"
