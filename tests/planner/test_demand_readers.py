"""Readers of recursive views by key, served from demand (planner/demand/readers.py), against
the fully materialized engine: lookups demand their keys, writes change every demanded
answer as a full evaluation would, evictions retract the demand, and the demanded relation
holds the rows of the demanded keys' closures only.

Each named shape runs a random interleaving of edge inserts and deletes (which make and
break cycles), lookups of random keys (a key with no edge among them: an empty closure) and
evictions of random reader keys, checking every answer against `Engine(partial=False)` and
the graph's invariants (a key present in the reader is demanded) after every step.
"""

from __future__ import annotations

import random

import pytest

from pomoview.dataflow.operators.child import Child
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.engine.engine import Engine

from .test_magic_sets import ABOVE, CONSTANTS, MUTUAL, SAME_GENERATION, TC_LEFT, TC_NONLINEAR, TC_RIGHT

NODES = 12


def gates(engine: Engine) -> list[DemandGate]:
    return [n for n in engine.graph.graph.nodes if isinstance(n, DemandGate)]


def demanded_rows(gate: DemandGate) -> set[tuple[object, ...]]:
    """The demanded relation's rows: what the states above the gate hold."""
    return set(dict(gate.inputs[0].query((), [()]).items()))


def edge_batch(rng: random.Random, program: str) -> dict[str, list[dict[str, object]]]:
    edges = [{"x": rng.randrange(NODES), "y": rng.randrange(NODES)} for _ in range(rng.randrange(1, 4))]
    if "color" in program:
        for edge in edges:
            edge["color"] = rng.choice(("red", "blue"))
    return {"edge": edges}


def drive(
    program: str,
    view: str,
    key: tuple[str, ...],
    seed: int,
    sources: dict[str, list[dict[str, object]]],
    whole: int | None = None,
) -> Engine:
    rng = random.Random(seed)
    partial, full = Engine(program, whole_source_rows=whole), Engine(program, partial=False)
    for engine in (partial, full):
        engine.write(insert=sources)
    present: list[dict[str, object]] = []
    for _ in range(40):
        roll = rng.random()
        if roll < 0.35 and "edge" in sources:
            batch = edge_batch(rng, program)
            if rng.random() < 0.5:
                old = [dict(e) for e in rng.sample(sources["edge"], min(2, len(sources["edge"])))]
                batch["edge"] = [e for e in batch["edge"] if e not in old]
                for engine in (partial, full):
                    engine.write(insert=batch, delete={"edge": old})
                sources["edge"] = [e for e in sources["edge"] if e not in old] + batch["edge"]
            else:
                for engine in (partial, full):
                    engine.write(insert=batch)
                sources["edge"] += batch["edge"]
        elif roll < 0.85:
            value = {a: rng.randrange(NODES + 2) for a in key}  # NODES+1: no edge reaches it
            assert partial.lookup(view, value) == full.lookup(view, value), (seed, value)
            present.append(value)
        else:
            evicted = partial.graph.graph.evict(rng.choice((1, 1 << 40)))
            assert evicted.keys >= 0
        partial.graph.graph.check_invariants()
    for value in present:
        assert partial.lookup(view, value) == full.lookup(view, value), (seed, value)
    return partial


@pytest.mark.parametrize(
    ("program", "view", "key"),
    [
        (TC_LEFT, "reach", ("x",)),
        (TC_LEFT, "reach", ("y",)),
        (TC_RIGHT, "reach", ("x",)),
        (TC_NONLINEAR, "reach", ("x",)),
        (MUTUAL, "even", ("x",)),
        (MUTUAL, "odd", ("x", "y")),
        (CONSTANTS, "red", ("x",)),
        (CONSTANTS, "from_zero", ("y",)),
        (ABOVE, "open_reach", ("x",)),
        (ABOVE, "fanout", ("x",)),
    ],
)
@pytest.mark.parametrize("whole", [None, 0], ids=["sources-whole", "sources-sliced"])
def test_demanded_lookups_equal_the_full_engine(
    program: str, view: str, key: tuple[str, ...], whole: int | None
) -> None:
    for seed in range(6):
        rng = random.Random(seed)
        sources: dict[str, list[dict[str, object]]] = edge_batch(rng, program)
        for _ in range(4):
            sources["edge"] += edge_batch(rng, program)["edge"]
        if "blocked" in program:
            sources["blocked"] = [{"x": rng.randrange(NODES)} for _ in range(3)]
        partial = drive(program, view, key, seed, sources, whole)
        assert gates(partial), "the recursive view was not read through demand"
        if whole == 0:
            assert any(gate.slices for gate in gates(partial)), "no source was read through a slice"


@pytest.mark.parametrize("whole", [None, 0], ids=["sources-whole", "sources-sliced"])
def test_same_generation(whole: int | None) -> None:
    rng = random.Random(4)
    parents = [{"child": c, "parent": rng.randrange(c)} for c in range(1, 30)]
    people = [{"id": i} for i in range(30)]
    partial = drive(SAME_GENERATION, "sg", ("a",), 4, {"parent": parents, "person": people}, whole)
    assert gates(partial)


def test_demanded_states_hold_the_demanded_closures_and_shrink_on_eviction() -> None:
    """Left-linear closure: the demanded relation holds exactly the looked-up keys' rows; a
    cycle broken by a delete while its key is demanded retracts the rows it gave; evicting
    every key empties the demanded states."""
    chain = [{"x": i, "y": i + 1} for i in range(10)] + [{"x": 10, "y": 0}] + [{"x": 20, "y": 21}]
    partial, full = Engine(TC_LEFT), Engine(TC_LEFT, partial=False)
    for engine in (partial, full):
        engine.write(insert={"edge": chain})
    assert partial.lookup("reach", {"x": 3}) == full.lookup("reach", {"x": 3})
    assert len(partial.lookup("reach", {"x": 3})) == 11  # the cycle: every node
    (gate,) = gates(partial)
    assert demanded_rows(gate) == full.lookup("reach", {"x": 3})
    for engine in (partial, full):
        engine.write(delete={"edge": [{"x": 10, "y": 0}]})  # breaks the cycle
    assert partial.lookup("reach", {"x": 3}) == full.lookup("reach", {"x": 3})
    assert demanded_rows(gate) == full.lookup("reach", {"x": 3}) == {(3, y) for y in range(4, 11)}
    partial.lookup("reach", {"x": 20})
    assert demanded_rows(gate) == full.lookup("reach", {"x": 3}) | {(20, 21)}
    assert partial.graph.graph.evict(1 << 40).keys == 2
    assert gate.demanded == set() and demanded_rows(gate) == set()
    assert partial.lookup("reach", {"x": 20}) == {(20, 21)}
    assert demanded_rows(gate) == {(20, 21)}


@pytest.mark.parametrize("whole", [None, 0], ids=["sources-whole", "sources-sliced"])
def test_the_recursion_is_reported_demand_driven_and_empties_with_its_demand(whole: int | None) -> None:
    """Stats of a demanded recursion: its Child is partial (demand-driven) and measured,
    holds the looked-up keys' closures only, and nothing once every key is evicted."""
    chain = [{"x": i, "y": i + 1} for i in range(30)]
    engine = Engine(TC_LEFT, whole_source_rows=whole)
    engine.write(insert={"edge": chain})
    assert len(engine.lookup("reach", {"x": 25})) == 5
    (child,) = [n for n in engine.graph.graph.nodes if isinstance(n, Child)]
    held = child.state_summary()
    assert held.partial and child.demand_driven and "demand-driven" in child.describe()
    assert sum(map(len, child.totals)) == 5  # 25's closure, not the chain's 465 pairs
    assert 5 <= held.rows and held.bytes > 0
    engine.lookup("reach", {"x": 0})
    assert child.state_summary().rows > held.rows
    engine.graph.graph.evict(1 << 40)
    assert sum(map(len, child.totals)) == 0
    # Two steps of the recursion on (a key demanded and released), the traces'
    # retractions are compacted against what they retract (Trace.advance_to): what is left
    # are entries at iterations that do not cancel.
    for _ in range(2):
        engine.lookup("reach", {"x": 29})
        engine.graph.graph.evict(1 << 40)
    info = {i.operator: i for i in engine.graph.graph.node_infos()}["Child"]
    assert info.partial and not info.unmeasured and info.rows < held.rows, info


def test_a_write_that_needs_unfetched_rows_keeps_the_demand_and_the_next_lookup_fetches_them() -> None:
    """Sources sliced: an edge from a node of 3's closure to a new node makes the slice of
    edge need a key it never fetched. The reader's key goes (its answer would lack that
    node's edges), its demand and the demanded rows stay, and the next lookup fetches the
    lacking key only: it pushes no demand again, and answers as the full engine does."""
    chain = [{"x": i, "y": i + 1} for i in range(6)] + [{"x": 30, "y": 31}]
    partial, full = Engine(TC_LEFT, whole_source_rows=0), Engine(TC_LEFT, partial=False)
    for engine in (partial, full):
        engine.write(insert={"edge": chain})
    assert partial.lookup("reach", {"x": 3}) == full.lookup("reach", {"x": 3}) == {(3, 4), (3, 5), (3, 6)}
    (gate,) = gates(partial)
    (piece,) = gate.slices
    reader = partial.graph.graph.readers[next(iter(partial.graph.graph.readers))]
    pushed, released = gate.metrics.filled_keys, gate.released
    for engine in (partial, full):
        engine.write(insert={"edge": [{"x": 6, "y": 30}]})  # 6 now reaches 30, never fetched
    assert (30,) in piece.unmet
    assert not reader.state.is_present((3,)), "the key's answer lacks 30's edges: it must go"
    assert gate.demanded == {(3,)} and gate.released == released
    assert demanded_rows(gate) == {(3, 4), (3, 5), (3, 6), (3, 30)}
    assert partial.lookup("reach", {"x": 3}) == full.lookup("reach", {"x": 3})
    assert (3, 31) in partial.lookup("reach", {"x": 3})
    assert gate.metrics.filled_keys == pushed and gate.released == released
    assert not piece.unmet
    partial.graph.graph.check_invariants()


def test_a_pinned_key_stays_and_a_settle_fills_what_its_slice_lacks() -> None:
    """The same write with the key pinned (a subscription's tap): the key stays, with the
    rows the step derived, and the graph hands its gate over (`take_unsettled`, once); the
    settle's walk (`ProgramGraph.start_settle`) fetches what the slice lacks, and the
    reader's rows, changed through the dataflow alone, equal the full engine's answer."""
    chain = [{"x": i, "y": i + 1} for i in range(6)] + [{"x": 30, "y": 31}, {"x": 31, "y": 32}]
    partial, full = Engine(TC_LEFT, whole_source_rows=0), Engine(TC_LEFT, partial=False)
    for engine in (partial, full):
        engine.write(insert={"edge": chain})
    assert partial.lookup("reach", {"x": 3}) == full.lookup("reach", {"x": 3})
    graph = partial.graph
    (gate,) = gates(partial)
    reader = graph.graph.readers[next(iter(graph.graph.readers))]
    captured: list[tuple[tuple[object, ...], int]] = []

    class Tap:
        def capture(self, changes: list[tuple[tuple[object, ...], int]]) -> None:
            captured.extend(changes)

    reader.tap([(3,)], Tap())  # type: ignore[list-item]
    assert graph.take_unsettled() == []
    for engine in (partial, full):
        engine.write(insert={"edge": [{"x": 6, "y": 30}]})  # 6 now reaches 30, never fetched
    assert reader.state.is_present((3,)), "a pinned key is never evicted"
    assert set(reader.read((3,)) or []) == {(3, 4), (3, 5), (3, 6), (3, 30)}  # lacking 31, 32
    assert graph.take_unsettled() == [gate] and graph.take_unsettled() == []
    settle = graph.start_settle(gate)
    result = settle.advance(partial._fetch)
    assert result.rows == [] and result.misses == []
    want = full.lookup("reach", {"x": 3})
    assert set(reader.read((3,)) or []) == want
    assert {row for row, weight in captured if weight > 0} == want - {(3, 4), (3, 5), (3, 6)}
    partial.graph.graph.check_invariants()
