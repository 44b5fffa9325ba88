"""JoinStream (PomoFlow §2.9.12): joins the two indexed ZSets a stream carries at one time.

Contract: bilinear in the two inputs of the same time, stateless. For every
key in both inputs and every pair of values it emits `join_fn(key, v1, v2)`
with weight w1 * w2. On its own it is the non-incremental join of two values;
in `incremental_join` it joins the two deltas of one time. An upquery joins the
inputs' answers (both inputs must be IndexWith nodes).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

from pomoview.dataflow.node import Node, Value, active, select_keys
from pomoview.dataflow.operators.index_with import IndexWith
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.upquery import Upquery, ask_all, indexed
from pomoview.dataflow.zset import IndexedZSet, ZSet

JoinFn = Callable[[Hashable, Hashable, Hashable], Hashable]


def flip(join_fn: JoinFn) -> JoinFn:
    """The join function with its two value arguments swapped (§2.9.13's join_fun_flipped)."""
    return lambda key, v1, v2: join_fn(key, v2, v1)


def join_stream(join_fn: JoinFn, a: IndexedZSet[Any, Any], b: IndexedZSet[Any, Any]) -> ZSet[Any]:
    out: ZSet[Any] = ZSet()
    for key, left in a.groups():
        right = b.group(key)
        if right is None:
            continue
        for v1, w1 in left.items():
            for v2, w2 in right.items():
                out.add(join_fn(key, v1, v2), w1 * w2)
    return out


class JoinStream(Node):
    def __init__(self, left: Node, right: Node, join_fn: JoinFn, schema: tuple[str, ...] = ()) -> None:
        super().__init__(schema, (left, right))
        self.join_fn = join_fn

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        a, b = inputs
        if not (active(a) and active(b)):
            return ZSet()
        assert isinstance(a, IndexedZSet) and isinstance(b, IndexedZSet), f"{self.describe()}: IndexedZSets"
        return join_stream(self.join_fn, a, b)

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        return not all(active(v) for v in inputs)

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        left, right = self.inputs
        assert isinstance(left, IndexWith) and isinstance(right, IndexWith), "join_stream reads IndexWith"
        left_rows, right_rows = yield from ask_all([indexed(left, (), [()]), indexed(right, (), [()])])
        joined = join_stream(self.join_fn, left_rows, right_rows)
        return select_keys(joined, cols, set(keys))  # type: ignore[arg-type]
