"""Plans thousands of operators deep: upqueries, evictions and the invariant checks walk them
with an explicit stack (dataflow/upquery.py), never a Python frame per operator.

Two measures: the Python stack a lookup takes does not grow with the plan's depth, and deep
programs (a 1,000-atom rule body, a 1,000-relation chain; 5,000 atoms in the slow sweep) run
writes, lookups that miss,
evictions and the invariant checks under Python's default recursion limit, with every answer
equal to the fully materialized graph's (partial_model.Model's oracle).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from partial_model import Model  # noqa: E402
from program_shapes import chain, wide  # noqa: E402

from pomoview.dataflow.node import Filters  # noqa: E402
from pomoview.dataflow.state.keyed_state import Key, Row  # noqa: E402
from pomoview.planner.compile import ProgramGraph, compile_program  # noqa: E402


def _no_rows(source: str, columns: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
    return []  # an empty store: the upquery still goes all the way down


def max_stack(fn: Callable[[], object]) -> int:
    """The deepest Python stack `fn` reaches, in frames below its caller."""
    depth = deepest = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal depth, deepest
        if event == "call":
            depth += 1
            deepest = max(deepest, depth)
        elif event == "return":
            depth -= 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return deepest


def lookup_frames(text: str, view: str) -> int:
    program = compile_program(text)
    graph = ProgramGraph(program)
    key = program.views[view]
    graph.reader(view, key, _no_rows)
    return max_stack(lambda: graph.lookup(view, key, [(1,)], _no_rows))


@pytest.mark.parametrize(
    ("make", "view"), [(wide, "w"), (chain, "r{n}")], ids=["wide-body", "relation-chain"]
)
def test_a_lookup_takes_as_many_frames_at_depth_400_as_at_depth_20(
    make: Callable[[int], str], view: str
) -> None:
    shallow = lookup_frames(make(20), view.format(n=20))
    deep = lookup_frames(make(400), view.format(n=400))
    print(f"{make.__name__}: {shallow} frames at 20, {deep} at 400")
    assert deep <= shallow + 2, (shallow, deep)
    assert deep < 100, deep


@contextmanager
def recursion_limit(limit: int) -> Iterator[None]:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def run_against_the_full_graph(m: Model, view: str, rng: random.Random, rounds: int) -> int:
    """Random writes, lookups of random keys that miss and fill, and evictions, checking each
    answer against the full graph and the graph's invariants after each step. The edges
    form a functional graph over six nodes (one edge out of each node at most, a write moves
    or removes one), so a path is one row whatever its length. Returns the lookups compared."""
    nodes = range(6)
    out: dict[int, int] = {}
    compared = 0
    for _ in range(rounds):
        batch: dict[Row, int] = {}
        for a in rng.sample(list(nodes), 2):
            if a in out:
                batch[(a, out.pop(a))] = -1
            if rng.random() < 0.8:
                out[a] = rng.choice(nodes)
                batch[(a, out[a])] = batch.get((a, out[a]), 0) + 1
        m.write({"e": {edge: op for edge, op in batch.items() if op}})
        m.check_graph()
        keys: list[Key] = [(k,) for k in rng.sample(list(nodes), 2)]
        pending = m.begin(view, ("a",), keys)
        for _ in range(20):
            got = m.attempt(pending)
            if got is not None:
                assert [set(rows) for rows in got] == m.reference(view, ("a",), keys)
                compared += 1
                break
        else:
            raise AssertionError("the lookup did not settle")
        m.check_graph()
        if rng.random() < 0.5:
            m.evict(rng)
            m.check_graph()
    return compared


def evict_all_but_a_pinned_key(m: Model) -> None:
    """Memory pressure with a subscription's pin on one reader key: eviction probes how far
    each eviction would reach (`Node.pinned_below`) down the whole plan, and evicts the rest."""
    (reader,) = m.partial.graph.readers.values()
    present = reader.state.keys()
    assert present, "the run left no key to pin"
    pinned = present[0]
    reader.state.pin(pinned)
    evicted = m.partial.graph.evict(1 << 40)
    assert evicted.keys > 0
    assert pinned in reader.state.keys()
    m.check_graph()


@pytest.mark.parametrize(
    ("text", "view"),
    [(wide(1_000), "w"), (chain(1_000), "r1000")],
    ids=["1000-atom-body", "1000-relation-chain"],
)
def test_deep_programs_run_under_the_default_recursion_limit(text: str, view: str) -> None:
    """1,000 levels: the old recursive upquery took 2 to 3 frames a level, past this limit."""
    m = Model(compile_program(text))
    with recursion_limit(1_000):
        compared = run_against_the_full_graph(m, view, random.Random(7), rounds=8)
        evict_all_but_a_pinned_key(m)
    assert compared == 8
    assert any(m.reference(view, ("a",), [(k,)]) != [set()] for k in range(6)), "every answer was empty"


@pytest.mark.slow
def test_the_issues_5000_atom_body_answers_under_the_default_recursion_limit() -> None:
    """The issue's case (past the default --max-rule-atoms, which refuses it at install)."""
    m = Model(compile_program(wide(5_000)))
    with recursion_limit(1_000):
        compared = run_against_the_full_graph(m, "w", random.Random(3), rounds=3)
    assert compared == 3


def test_mentions_recur_walks_deep_and_shared_plans_without_recursion() -> None:
    """ra.mentions_recur on a chain of 5,000 Selects (a frame per operator passes Python's
    default recursion limit) and on a 60-level diamond (each level joins the one below with
    itself: 2^60 paths, one object per level), with and without a Recur at the bottom; the
    memo a caller gives holds every operator it walked, once."""
    from pomoview.planner.ir import ra

    for bottom, expected in ((ra.Recur("r", ("a",)), True), (ra.Scan("s", ("a",)), False)):
        deep: ra.Expr = bottom
        for _ in range(5000):
            deep = ra.Select(deep, ())
        assert ra.mentions_recur(deep) is expected
        diamond: ra.Expr = bottom
        for _ in range(60):
            diamond = ra.Join(diamond, diamond)
        memo: dict[int, bool] = {}
        assert ra.mentions_recur(diamond, memo) is expected
        assert len(memo) == 61 and set(memo.values()) == {expected}
