"""Sink (PomoFlow §2.8.5): hands its inputs' values at each time to a callback, and outputs nothing.

Contract: stateless; N inputs, no output stream. It runs at a time when any
input carries something, with every input's value (None for the silent ones).
The Reader is the stateful sink that answers lookups; this one is for
subscribers, exporters and tests.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet

Callback = Callable[[Sequence[Value | None], Time], None]


class Sink(Node):
    kind = "sink"

    def __init__(self, inputs: Sequence[Node], callback: Callback) -> None:
        super().__init__((), tuple(inputs))
        self.callback = callback

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        self.callback(inputs, time)
        return None

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise TypeError("a sink has no output to upquery")
