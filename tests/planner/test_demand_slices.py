"""Sources read inside demanded recursion through slices fetched by demand (issue 25, part 3:
planner/demand/magic.py "Slices", dataflow/operators/source_slice.py), in process.

The fetch here answers a request only at the round after the one that asked for it, as the
server's keyed Spark jobs do (server/reads/at_hand.py), so a lookup runs in rounds and each
round's misses are what the server would send to Spark. Oracles: a BFS over the edges for
the closures, the full engine for the answers.
"""

from __future__ import annotations

from collections.abc import Iterable

from pomoview.dataflow.node import FetchRequest, Filters
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.source_slice import SourceSlice
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.engine.engine import Engine

from .test_magic_sets import TC_LEFT, TC_RIGHT

VIEW_TC_LEFT = TC_LEFT + "view reach(x).\n"


class Later:
    """A fetch that answers a request of `edge` only once it was asked for in an earlier
    round (`next_round` runs the jobs), counting the requests."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.asked: list[FetchRequest] = []
        self.ready: set[tuple[str, tuple[str, ...], frozenset[Key]]] = set()

    def __call__(
        self, source: str, names: tuple[str, ...], keys: list[Key], filters: Filters
    ) -> Iterable[Row] | None:
        if source == "edge" and (source, names, frozenset(keys)) not in self.ready:
            return None
        return self.engine._fetch(source, names, keys, filters)

    def run_jobs(self, misses: list[FetchRequest]) -> None:
        self.asked += misses
        for miss in misses:
            self.ready.add((miss.source, miss.columns, frozenset(miss.keys)))


def lookup_in_rounds(
    engine: Engine, key: int, fetch: Later, view: tuple[str, str] = ("reach", "x")
) -> tuple[set[Row], list[list[FetchRequest]]]:
    """`view` (its name and key attribute) looked up at `key` as the server does: a round
    per batch of misses, each answered at the next round."""
    pending = engine.graph.start_lookup(view[0], (view[1],), [(key,)])
    rounds: list[list[FetchRequest]] = []
    while True:
        result = pending.advance(fetch)
        if result.rows is not None:
            return set(result.rows[0]), rounds
        rounds.append(result.misses)
        fetch.run_jobs(result.misses)


def bfs(edges: list[tuple[int, int]], start: int) -> set[int]:
    out: dict[int, list[int]] = {}
    for x, y in edges:
        out.setdefault(x, []).append(y)
    seen: set[int] = set()
    frontier = [start]
    while frontier:
        frontier = [y for x in frontier for y in out.get(x, ()) if y not in seen]
        seen.update(frontier)
    return seen


def slice_of(engine: Engine) -> SourceSlice:
    (gate,) = [n for n in engine.graph.graph.nodes if isinstance(n, DemandGate)]
    (piece,) = gate.slices
    return piece


def tree() -> list[tuple[int, int]]:
    """A binary tree of depth 5 below 1 (nodes 1..63), and an edge elsewhere."""
    return [(p, c) for p in range(1, 32) for c in (2 * p, 2 * p + 1)] + [(100, 101)]


def test_a_closure_costs_one_coalesced_fetch_per_level_of_its_depth() -> None:
    engine = Engine(VIEW_TC_LEFT, whole_source_rows=0)
    edges = tree()
    engine.write(insert={"edge": [{"x": x, "y": y} for x, y in edges]})
    fetch = Later(engine)
    rows, rounds = lookup_in_rounds(engine, 1, fetch)
    assert rows == {(1, y) for y in bfs(edges, 1)}
    # One request of edge per round, holding every key of that level of the tree (and the
    # leaves' empty level): 1, then 2-3, then 4-7, ... then 32-63.
    assert [len(misses) for misses in rounds] == [1] * 6
    levels = [sorted(k for (k,) in misses[0].keys) for misses in rounds]
    assert levels == [list(range(2**d, 2 ** (d + 1))) for d in range(6)]
    piece = slice_of(engine)
    # The slice holds the edges of the closure's nodes and of nothing else.
    assert set(piece.fetched.keys()) == {(n,) for n in bfs(edges, 1) | {1}}
    assert piece.fetched.row_count() == 62


def test_a_warm_lookup_asks_nothing_and_eviction_empties_the_slice() -> None:
    engine = Engine(VIEW_TC_LEFT, whole_source_rows=0)
    edges = tree()
    engine.write(insert={"edge": [{"x": x, "y": y} for x, y in edges]})
    fetch = Later(engine)
    lookup_in_rounds(engine, 4, fetch)
    rows, rounds = lookup_in_rounds(engine, 4, fetch)
    assert rounds == [] and rows == {(4, y) for y in bfs(edges, 4)}
    # A key inside the closure fetched already: its need is met, no round either.
    rows, rounds = lookup_in_rounds(engine, 8, fetch)
    assert rounds == [] and rows == {(8, y) for y in bfs(edges, 8)}
    assert engine.graph.graph.evict(1 << 40).keys == 2
    piece = slice_of(engine)
    assert piece.fetched.keys() == [] and piece.needed == set() and piece.unmet == set()
    engine.graph.graph.check_invariants()


def test_a_write_that_reaches_an_unfetched_key_evicts_the_demanded_keys() -> None:
    """An edge from the closure to a node never fetched: the closure's answer would lack
    that node's edges, so the gate's keys are evicted; the next lookup fetches it. An edge
    inside the fetched nodes changes the answer in place."""
    engine, full = Engine(VIEW_TC_LEFT, whole_source_rows=0), Engine(VIEW_TC_LEFT, partial=False)
    chain = [{"x": i, "y": i + 1} for i in range(5)] + [{"x": 50, "y": 51}, {"x": 51, "y": 52}]
    for e in (engine, full):
        e.write(insert={"edge": chain})
    fetch = Later(engine)
    lookup_in_rounds(engine, 0, fetch)
    reader = engine.graph.graph.readers[("reach", ("x",))]
    for e in (engine, full):
        e.write(insert={"edge": [{"x": 2, "y": 0}]})  # a cycle among fetched nodes
    assert reader.state.is_present((0,))
    rows, rounds = lookup_in_rounds(engine, 0, fetch)
    assert rounds == [] and rows == full.lookup("reach", {"x": 0})
    for e in (engine, full):
        e.write(insert={"edge": [{"x": 3, "y": 50}]})  # to 50, whose edges were never fetched
    assert not reader.state.is_present((0,))
    engine.graph.graph.check_invariants()
    rows, rounds = lookup_in_rounds(engine, 0, fetch)
    assert rows == full.lookup("reach", {"x": 0}) and (52 in {y for _, y in rows})
    assert len(rounds) >= 2  # 50, then 51 and 52 (the write's nodes only: the rest is held)


def test_an_eviction_between_rounds_keeps_the_keys_being_filled() -> None:
    engine, full = (
        Engine(TC_RIGHT + "view reach(x).\n", whole_source_rows=0),
        Engine(VIEW_TC_LEFT, partial=False),
    )
    edges = tree()
    for e in (engine, full):
        e.write(insert={"edge": [{"x": x, "y": y} for x, y in edges]})
    fetch = Later(engine)
    pending = engine.graph.start_lookup("reach", ("x",), [(2,)])
    result = pending.advance(fetch)
    assert result.rows is None
    fetch.run_jobs(result.misses)
    engine.graph.graph.evict(1 << 40)  # between two rounds: nothing present yet
    engine.write(insert={"edge": [{"x": 100, "y": 102}]})  # and an epoch
    full.write(insert={"edge": [{"x": 100, "y": 102}]})
    while result.rows is None:
        result = pending.advance(fetch)
        fetch.run_jobs(result.misses)
    assert set(result.rows[0]) == full.lookup("reach", {"x": 2})
    engine.graph.graph.check_invariants()


def test_keys_a_rule_needs_before_any_demand_are_fetched() -> None:
    """A rule whose key attribute an aggregate computes is guarded at its end, so its body's
    constant demands reach(x: 1) as a fact: the slice needs edge's key 1 from the build on,
    before any key is demanded (found by the sliced clingo sweep, seed 100100)."""
    program = VIEW_TC_LEFT + "reach(x: N, y: Y) :- N := count : edge(), reach(x: 1, y: Y).\n"
    engine, full = Engine(program, whole_source_rows=0), Engine(program, partial=False)
    for e in (engine, full):
        e.write(insert={"edge": [{"x": 1, "y": 7}, {"x": 7, "y": 8}, {"x": 9, "y": 1}]})
    for key in (3, 9, 1, 2):
        assert engine.lookup("reach", {"x": key}) == full.lookup("reach", {"x": key}), key
    assert (3, 8) in full.lookup("reach", {"x": 3})
    engine.graph.graph.check_invariants()


def test_an_ordered_view_refilled_by_the_write_that_leaves_keys_unmet() -> None:
    """A TopK below the gate refills a key inside the write's step (no fetch allowed there)
    while the same write makes the closure reach nodes never fetched: the gate's fill misses
    there, so the TopK evicts the key (pull_in_step), as the write's eviction would after
    the step; the next lookup is exact."""
    program = TC_LEFT + "view reach(x) order by y desc limit 2.\n"
    engine, full = Engine(program, whole_source_rows=0), Engine(program, partial=False)
    chain = [{"x": i, "y": i + 1} for i in range(5)] + [{"x": -7, "y": -8}]
    for e in (engine, full):
        e.write(insert={"edge": chain})
    assert engine.lookup("reach", {"x": 0}) == full.lookup("reach", {"x": 0}) == {(0, 5), (0, 4)}
    # 5 leaves the window (a refill from below), and -7, never fetched, is reached.
    for e in (engine, full):
        e.write(delete={"edge": [{"x": 4, "y": 5}]}, insert={"edge": [{"x": 1, "y": -7}]})
    engine.graph.graph.check_invariants()
    assert engine.lookup("reach", {"x": 0}) == full.lookup("reach", {"x": 0}) == {(0, 4), (0, 3)}
