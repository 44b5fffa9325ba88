"""Child.rows_of (what ChildOutput answers upqueries with) against a plain-Python closure of
the edges, as the recursion's output changes under random inserts and deletes: the indexes
by the upqueried columns, made at the first upquery and kept with every step after (the
output's rows then held by them alone), must always give the closure's rows."""

from __future__ import annotations

import random

from pomoview.dataflow.operators.child import Child
from pomoview.engine.engine import Engine

TC = """
source edge(x: int, y: int).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), edge(x: Y, y: Z).
"""


def test_the_index_of_a_childs_output_follows_its_steps() -> None:
    rng = random.Random(11)
    engine = Engine(TC, partial=False)
    edges: set[tuple[int, int]] = set()
    engine.read("reach")
    (child,) = [n for n in engine.graph.graph.nodes if isinstance(n, Child)]
    for step in range(60):
        new = {(rng.randrange(9), rng.randrange(9)) for _ in range(2)} - edges
        old = set(rng.sample(sorted(edges), min(len(edges), rng.randrange(3))))
        engine.write(
            insert={"edge": [{"x": x, "y": y} for x, y in new]},
            delete={"edge": [{"x": x, "y": y} for x, y in old]},
        )
        edges = (edges | new) - old
        for cols in ((0,), (1,), (0, 1)):
            keys = [tuple(rng.randrange(10) for _ in cols) for _ in range(3)]
            scan = {r: 1 for r in closure(edges) if tuple(r[c] for c in cols) in keys}
            assert dict(child.rows_of(0, cols, keys).items()) == scan, (step, cols, keys)
        assert dict(child.rows_of(0, (), [()]).items()) == dict.fromkeys(closure(edges), 1)
        assert len(child.totals[0]) == len(closure(edges))
        engine.graph.graph.check_invariants()
    assert child.totals[0].whole is None and len(child.totals[0].indexes) == 3  # held by the indexes alone


def closure(edges: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The transitive closure, by repeated composition to a fixed point."""
    pairs = set(edges)
    while True:
        more = {(x, w) for x, y in pairs for z, w in edges if y == z} - pairs
        if not more:
            return pairs
        pairs |= more
