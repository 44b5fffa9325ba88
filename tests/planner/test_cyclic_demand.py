"""A keyed reader of a view with a cyclic body goes through the demand transformation
(planner/demand/readers.py): its WcojJoin is guarded by the demanded keys and reads its
sources through slices fetched by demand, so a lookup computes the key's neighbourhood, not
the whole join, in a fixed number of Spark rounds (two for a triangle). In process;
oracles: Python's triangles and the fully materialized engine."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pomoview.dataflow.node import FetchRequest
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.wcoj import WcojJoin
from pomoview.dataflow.state.keyed_state import Row
from pomoview.engine.engine import Engine
from pomoview.planner.demand import readers

from .test_demand_slices import Later
from .test_demand_slices import lookup_in_rounds as in_rounds

TRI = """
source edge(x: int, y: int).
tri(a: A, b: B, c: C) :- edge(x: A, y: B), edge(x: B, y: C), edge(x: A, y: C).
view tri(a).
"""


def lookup_in_rounds(engine: Engine, a: int, fetch: Later) -> tuple[set[Row], list[list[FetchRequest]]]:
    return in_rounds(engine, a, fetch, ("tri", "a"))


def triangles(edges: set[tuple[int, int]], a: int) -> set[tuple[int, int, int]]:
    return {(a, b, c) for x, b in edges if x == a for y, c in edges if y == b and (a, c) in edges}


def wcoj_rows(engine: Engine) -> int:
    (join,) = [n for n in engine.graph.graph.nodes if isinstance(n, WcojJoin)]
    summary = join.state_summary()
    assert summary is not None
    return summary.rows


def two_cliques() -> set[tuple[int, int]]:
    """A 6-clique on 0-5 (every ordered pair) and, far from it, a 30-clique on 100-129."""
    small = {(a, b) for a in range(6) for b in range(6) if a != b}
    big = {(a, b) for a in range(100, 130) for b in range(100, 130) if a != b}
    return small | big


def test_a_keyed_lookup_fetches_its_neighbourhood_in_two_rounds() -> None:
    edges = two_cliques()
    engine = Engine(TRI, whole_source_rows=0)  # every source through slices
    engine.write(insert={"edge": [{"x": x, "y": y} for x, y in sorted(edges)]})
    assert any(isinstance(n, DemandGate) for n in engine.graph.graph.nodes) is False  # no reader yet
    fetch = Later(engine)
    rows, rounds = lookup_in_rounds(engine, 0, fetch)
    assert rows == triangles(edges, 0) and len(rows) == 20
    # Round 1: 0's edges; 2: its neighbours'. The shortcut (0, c) reads the slice by 0, which
    # the first atom needed already (magic._coarser), not by (0, c), a third round. A fixed
    # number of rounds for the body, whatever the size of the graph.
    assert [[m.columns for m in misses] for misses in rounds] == [[("x",)], [("x",)]], rounds
    fetched = {k for misses in rounds for miss in misses for k in miss.keys}
    assert all(k[0] < 6 for k in fetched), "nothing of the far clique is fetched"
    # The join holds the small clique's edges (and the demand), never the 870 of the far one.
    assert wcoj_rows(engine) < 100, wcoj_rows(engine)
    assert any(isinstance(n, DemandGate) for n in engine.graph.graph.nodes)
    (join,) = [n for n in engine.graph.graph.nodes if isinstance(n, WcojJoin)]
    summary = join.state_summary()
    assert summary is not None and summary.partial and join.describe().endswith("; demand-driven)")
    # A warm lookup asks nothing.
    assert lookup_in_rounds(engine, 0, fetch) == (rows, [])


def test_the_plain_plan_of_a_keyed_cyclic_view_is_decided_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Edges held whole: the keyed reader keeps the plain plan, which the rewrite decides by
    extending the program; a build that misses (the whole fetch of edge, answered a round
    later) asks again without extending it again."""
    calls: list[tuple[Any, ...]] = []
    real = readers.extend

    def counted(*args: Any) -> Any:
        calls.append(args[1:3])
        return real(*args)

    monkeypatch.setattr(readers, "extend", counted)
    edges = two_cliques()
    engine = Engine(TRI)
    engine.write(insert={"edge": [{"x": x, "y": y} for x, y in sorted(edges)]})
    rows, rounds = lookup_in_rounds(engine, 0, Later(engine))
    assert rows == triangles(edges, 0) and len(rounds) == 1  # one build missed, one answered
    assert calls == [("tri", ("a",))]
    assert engine.graph.demands.full[("tri", ("a",))] == "a cyclic body whose sources are all held whole"


SQ = """
source edge(x: int, y: int).
sq(a: A, c: C) :- edge(x: A, y: B), edge(x: B, y: C), edge(x: C, y: D), edge(x: D, y: A).
view sq(a).
"""


def test_a_four_cycle_reads_its_closing_atom_by_the_key_in_the_first_round() -> None:
    # Two 4-cycles through 0 (0 1 2 3 and 0 5 6 3), a path that closes none, the far clique.
    edges = {(0, 1), (1, 2), (2, 3), (3, 0), (0, 5), (5, 6), (6, 3), (6, 7), (7, 8)}
    edges |= {(a, b) for a in range(100, 130) for b in range(100, 130) if a != b}
    engine = Engine(SQ, whole_source_rows=0)
    engine.write(insert={"edge": [{"x": x, "y": y} for x, y in sorted(edges)]})
    rows, rounds = in_rounds(engine, 0, Later(engine), ("sq", "a"))
    nxt: dict[int, set[int]] = {}
    for x, y in edges:
        nxt.setdefault(x, set()).add(y)
    want = {(0, c) for b in nxt[0] for c in nxt[b] for d in nxt.get(c, ()) if (d, 0) in edges}
    assert rows == want == {(0, 2), (0, 6)}
    # Round 1: 0's out-edges and, for the closing atom edge(D, 0), its in-edges (magic._coarser:
    # by the key alone); 2: B's out-edges; 3: C's. By the pair (D, 0) it was a fourth round.
    columns = [sorted(m.columns for m in misses) for misses in rounds]
    assert columns == [[("x",), ("y",)], [("x",)], [("x",)]], columns
    assert [m.keys for m in rounds[0] if m.columns == ("y",)] == [((0,),)]
    fetched = {k for misses in rounds for miss in misses for k in miss.keys}
    assert all(k[0] < 100 for k in fetched), "nothing of the far clique is fetched"


def test_writes_lookups_and_evictions_agree_with_python_and_the_full_engine() -> None:
    rng = random.Random(20261207)
    nodes = 12
    for whole in (0, None):  # sources through slices, then read whole
        engine = Engine(TRI, whole_source_rows=whole)
        full = Engine(TRI, partial=False)
        edges: set[tuple[int, int]] = set()
        fetch = Later(engine)
        for step in range(40):
            insert = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(rng.randint(0, 6))}
            delete = set(rng.sample(sorted(edges), k=min(len(edges), rng.randint(0, 3)))) - insert
            edges = (edges - delete) | insert
            for e in (engine, full):
                e.write(
                    insert={"edge": [{"x": x, "y": y} for x, y in sorted(insert)]},
                    delete={"edge": [{"x": x, "y": y} for x, y in sorted(delete)]},
                )
            for a in rng.sample(range(nodes), 3):
                rows, _ = lookup_in_rounds(engine, a, fetch)
                want = triangles(edges, a)
                assert rows == want == full.lookup("tri", {"a": a}), (whole, step, a)
            if step % 7 == 6:
                engine.graph.graph.evict(1 << 40)
            engine.graph.graph.check_invariants()
        # Sources held whole keep the plain plan: the full WcojJoin answers a new key by a
        # lookup path, cheaper than a step of the graph for the key's demand.
        gates = [n for n in engine.graph.graph.nodes if isinstance(n, DemandGate)]
        assert len(gates) == (1 if whole == 0 else 0), (whole, gates)
