"""Inspect (PomoFlow §2.9.6): shows a stream's values to a callback and passes them on unchanged.

A debugging aid. Contract: linear (the identity), stateless apart from the
callback. At every time its input carries something, the node calls
`callback(value, time)` and outputs that same value object (so the callback
must not mutate it); at a time when the input carries nothing the node is
idle and the callback is not called. Any stream value passes (a ZSet, an
IndexedZSet, a trace). An upquery passes through to the input unchanged and
does NOT call the callback: the callback sees the stream, and an upquery
answer is not part of the stream. A missing key is the input's business.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import TypeVar

from pomoview.dataflow.node import Node, Value, active
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.upquery import Upquery, rows
from pomoview.dataflow.zset import ZSet

E = TypeVar("E", bound=Hashable)

Callback = Callable[[Value, Time], object]


def inspect(callback: Callable[[ZSet[E]], object], zset: ZSet[E]) -> ZSet[E]:
    """The spec's form: calls `callback(zset)` and returns `zset` itself."""
    callback(zset)
    return zset


class Inspect(Node):
    def __init__(self, parent: Node, callback: Callback, label: str = "") -> None:
        super().__init__(parent.schema, (parent,))
        self.callback = callback
        self.label = label

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        value = inputs[0]
        if value is not None and active(value):
            self.callback(value, time)
        return value

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> Upquery[ZSet[Row]]:
        return (yield rows(self.inputs[0], cols, keys))

    def describe(self) -> str:
        return f"Inspect({self.label})"
