"""A step visits only the nodes its sources reach (Circuit.reached), and computes what a
visit of every node computes: random steps over two sources joined by a union, against a
circuit whose every node is visited."""

from __future__ import annotations

import random
from collections.abc import Mapping

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.map import Column, Map
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.zset import ZSet


class EveryNode(Circuit):
    """The reference: a circuit that visits every node at every pass."""

    def reached(self, external: Mapping[int, Value | None]) -> list[Node]:
        return self.nodes


def build(kind: type[Circuit]) -> tuple[Circuit, Node, Node]:
    a, b = Input("a", ("x",)), Input("b", ("x",))
    over_a, over_b = Map(a, ("x",), [Column(0)]), Map(b, ("x",), [Column(0)])
    return kind([over_a, over_b, Union([over_a, over_b])]), a, b


def test_a_step_of_one_source_does_not_visit_the_nodes_of_another() -> None:
    circuit, a, b = build(Circuit)
    [union] = [n for n in circuit.nodes if isinstance(n, Union)]
    only_a = circuit.reached({id(a): ZSet({(1,): 1})})
    assert [n.describe() for n in only_a] == ["Input(a)", "Map('x',)", "Union('x',)"]
    assert b not in only_a and union in only_a
    assert circuit.reached({id(a): ZSet(), id(b): None}) == []  # empty deltas reach nothing
    assert len(circuit.reached({id(a): ZSet({(1,): 1}), id(b): ZSet({(2,): 1})})) == 5


def test_visiting_the_reached_nodes_computes_what_visiting_every_node_does() -> None:
    rng = random.Random(5)
    reached, _, _ = build(Circuit)
    everything, _, _ = build(EveryNode)
    for _ in range(200):
        changes = {
            source: ZSet({(rng.randrange(5),): rng.choice((1, -1)) for _ in range(rng.randrange(3))})
            for source in rng.sample(["a", "b"], rng.randrange(3))
        }
        got, expected = reached.step(changes), everything.step(changes)
        for g, e in zip(reached.nodes, everything.nodes, strict=True):
            assert got.get(id(g)) == expected.get(id(e)) or not (got.get(id(g)) or expected.get(id(e)))
