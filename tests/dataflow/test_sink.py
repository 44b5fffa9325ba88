"""Sink: sees every input's value at each time it runs, and outputs nothing."""

from __future__ import annotations

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.reference.sink import Sink
from pomoview.dataflow.zset import ZSet


def test_sink_receives_each_inputs_value_per_time() -> None:
    seen: list[tuple[list[object], tuple[int, ...]]] = []
    a, b = Input("a", ("x",)), Input("b", ("x",))
    sink = Sink([a, b], lambda values, time: seen.append((list(values), time)))
    circuit = Circuit([sink])
    assert sink.kind == "sink"
    circuit.step({"a": ZSet({(1,): 1})})
    circuit.step({})  # nothing arrives: the sink does not run
    circuit.step({"a": ZSet({(2,): -1}), "b": ZSet({(3,): 2})})
    assert seen == [
        ([ZSet({(1,): 1}), None], (1,)),
        ([ZSet({(2,): -1}), ZSet({(3,): 2})], (3,)),
    ]
    assert circuit.step({"a": ZSet({(4,): 1})})[id(sink)] is None
