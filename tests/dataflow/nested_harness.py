"""Drives a root circuit of Input sources with random weighted deltas, epoch by epoch.

`run_epochs` steps the circuit, sums the output's deltas, and after every epoch
compares the sum with `reference(integrals)`: a non-incremental function of the
inputs' accumulated values.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Node
from pomoview.dataflow.zset import ZSet

Row = tuple[int, int]

# Weighted deltas (not sets): weights -2..2 exercise negative and multiple counts.
delta = st.dictionaries(
    st.tuples(st.integers(0, 3), st.integers(0, 3)), st.integers(-2, 2).filter(bool), max_size=5
)


def epochs(*sources: str, max_epochs: int = 8) -> st.SearchStrategy[list[dict[str, dict[Row, int]]]]:
    return st.lists(st.fixed_dictionaries({s: delta for s in sources}), min_size=1, max_size=max_epochs)


def run_epochs(
    circuit: Circuit,
    output: Node,
    history: list[dict[str, dict[Row, int]]],
    reference: Callable[[dict[str, ZSet[Row]]], ZSet[object]],
) -> None:
    integrals: dict[str, ZSet[Row]] = {}
    total: ZSet[object] = ZSet()
    for changes in history:
        step = {source: ZSet(ops) for source, ops in changes.items()}
        for source, ops in step.items():
            integrals.setdefault(source, ZSet()).extend(ops)
        out = circuit.step(step).get(id(output))
        if out is not None:
            assert isinstance(out, ZSet)
            total.extend(out)
        expected = reference(integrals)
        assert total == expected, (changes, total, expected)
