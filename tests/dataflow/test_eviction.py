"""Eviction under memory pressure (dataflow/eviction.py) on the vote program's graph:
least recently used keys go first, a key read since the last sweep gets a second chance,
what is freed is at least what was asked when there is enough, answers stay those of a full
graph (the reference) after evictions, and full states are never touched."""

from __future__ import annotations

from collections import Counter

from pomoview.dataflow.node import Filters
from pomoview.dataflow.state.keyed_state import _SAMPLE, Key, KeyedState, Row
from pomoview.planner.compile import ProgramGraph, compile_program

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: I, title: T, votes: N) :- article(id: I, title: T), N := count : vote(article_id: I).
"""

ARTICLES = [(i, f"article {i}") for i in range(50)]
VOTE_ROWS = [(u % 50 if u % 3 else 0, u) for u in range(2000)]


def fetch(source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
    rows = ARTICLES if source == "article" else VOTE_ROWS
    if not names:
        return list(rows)
    wanted = set(keys)
    return [r for r in rows if (r[0],) in wanted]


def test_a_sweep_takes_the_least_recently_used_and_spares_a_key_read_since() -> None:
    state = KeyedState(partial=True)
    for k in range(6):
        state.fill((k,), [((k,), 1)])
    state.touch((0,))
    state.touch((99,))  # not present: no mark
    assert state.sweep(2) == [(1,), (2,)]
    # (0,) lost its mark and moved behind the others: it is taken after them.
    assert state.sweep(10) == [(1,), (2,), (3,), (4,), (5,), (0,)]


def test_evicting_under_pressure_frees_what_was_asked_and_answers_stay_exact() -> None:
    program = compile_program(VOTES)
    graph = ProgramGraph(program, partial=True)
    full = ProgramGraph(program, partial=False)
    keys = [(i,) for i in range(50)]
    for key in keys:
        graph.lookup("articleWithVotes", ("id",), [key], fetch)
    nodes = graph.graph.nodes
    before = graph.graph.partial_bytes()
    # Keep the first ten keys hot.
    graph.lookup("articleWithVotes", ("id",), keys[:10], fetch)
    done = graph.graph.evict(before // 2)
    after = graph.graph.partial_bytes()
    assert done.estimated_bytes >= before // 2 and after <= before - before // 2
    graph.graph.check_invariants()
    reader = graph.graph.readers[("articleWithVotes", ("id",))]
    assert all(reader.state.get(k) is not None for k in keys[:10]), "hot keys survive"
    assert sum(reader.state.get(k) is None for k in keys) > 0
    evictions = Counter(type(n).__name__ for n in nodes if n.metrics.evictions)
    assert evictions["SourceIndex"] > 0 and evictions["Reader"] > 0, evictions
    # Every answer, evicted keys refetched, equals the full graph's.
    want = full.lookup("articleWithVotes", ("id",), keys, fetch)
    assert graph.lookup("articleWithVotes", ("id",), keys, fetch) == want
    # Evicting everything leaves no partial state and breaks nothing.
    graph.graph.evict(10 * before)
    graph.graph.check_invariants()
    assert graph.lookup("articleWithVotes", ("id",), keys, fetch) == want


def test_a_full_graph_has_nothing_to_evict() -> None:
    full = ProgramGraph(compile_program(VOTES), partial=False)
    full.lookup("articleWithVotes", ("id",), [(1,)], fetch)
    done = full.graph.evict(1 << 30)
    assert done.keys == 0 and done.steps == 0
    votes = sum(1 for a, _ in VOTE_ROWS if a == 1)
    assert full.lookup("articleWithVotes", ("id",), [(1,)], fetch) == [[(1, "article 1", votes)]]


def test_the_size_estimate_is_remade_whenever_a_count_changes() -> None:
    """`estimate_bytes` keeps its last answer while the counts of keys and rows stand still
    (eviction asks every state after each step); any write, fill or eviction that moves a
    count gets the estimate made from scratch of the state as it now is."""
    import random

    rng = random.Random(5)
    state = KeyedState(partial=True)
    remade = 0
    for step in range(400):
        before = (state.present_keys(), state.row_count())
        estimate_before = state.estimate_bytes()
        key = (rng.randrange(30),)
        op = rng.random()
        if op < 0.3 and not state.is_present(key):
            width = rng.choice((1, 5, 40))  # rows of different sizes move the estimate
            state.fill(key, [((key[0], j, "x" * width), 1) for j in range(rng.randrange(4))])
        elif op < 0.8:
            state.add(key, (key[0], rng.randrange(3), "y" * rng.choice((1, 60))), rng.choice((1, -1)))
        elif state.is_present(key):
            state.evict(key)
        estimate = state.estimate_bytes()
        if (state.present_keys(), state.row_count()) != before:
            assert estimate == state._sample_bytes(_SAMPLE), step
            remade += 1
        else:
            assert estimate == estimate_before, step
    assert remade > 100, remade


def test_evicting_everything_in_slices_keeps_every_answer_exact_between_them() -> None:
    """`evict_everything(max_keys)` takes at most that many keys a call, leaves the graph
    consistent after each (its invariants; a lookup between slices answers as the full graph
    does, and refills what it reads), and the last slice leaves no key anywhere."""
    program = compile_program(VOTES)
    graph = ProgramGraph(program, partial=True)
    full = ProgramGraph(program, partial=False)
    keys = [(i,) for i in range(50)]
    want = full.lookup("articleWithVotes", ("id",), keys, fetch)
    assert graph.lookup("articleWithVotes", ("id",), keys, fetch) == want
    present = sum(s.present_keys() for n in graph.graph.nodes if (s := n.eviction_state()))
    slices = 0
    while True:
        if slices and slices % 3 == 0:
            assert graph.lookup("articleWithVotes", ("id",), keys[:5], fetch) == want[:5]
        done = graph.graph.evict_everything(max_keys=7)
        slices += 1
        assert done.keys <= 7, done
        graph.graph.check_invariants()
        if done.done:
            break
    # The sources' states alone held 100 keys: 7 a slice is at least 15 slices.
    assert present >= 100 and slices >= 15, (present, slices)
    for node in graph.graph.nodes:
        state = node.eviction_state()
        assert state is None or state.present_keys() == 0, node.describe()
    assert graph.lookup("articleWithVotes", ("id",), keys, fetch) == want
