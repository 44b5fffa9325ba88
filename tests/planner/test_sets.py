"""The pass that drops the Distinct of a relation already a set (planner/ir/sets.py): which
relations lose it and which keep it, and that a relation without it answers as one with it
(the Engine, fully materialized and partial, against the plan with every Distinct kept)."""

from __future__ import annotations

import random

import pytest

from pomoview.dataflow.node import Filters, fetch_from
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram, ProgramGraph, compile_program
from pomoview.planner.ir import ra
from pomoview.planner.ir.lower import lower

DECLS = """
source a(x: int, y: int).
source b(x: int).
source e(src: int, dst: int).
"""

DROPPED = {
    "join keeping every column": "r(x: X, y: Y, z: Z) :- a(x: X, y: Y), a(x: Y, y: Z).",
    "semijoin": "r(x: X, y: Y) :- a(x: X, y: Y), b(x: X).",
    "negation and comparison": "r(x: X, y: Y) :- a(x: X, y: Y), !b(x: Y), X < Y.",
    "count per row": "r(x: X, n: N) :- b(x: X), N := count : a(x: X).",
    "constant column": "r(x: X, y: Y, k: 7) :- a(x: X, y: Y).",
    "renamed": "r(p: Y, q: X) :- a(x: X, y: Y).",
    "derived relation read": (
        "s(x: X, y: Y) :- a(x: X, y: Y), a(x: Y, y: X).\nr(x: X, y: Y) :- s(x: X, y: Y), b(x: Y)."
    ),
    "triangle": "r(a: A, b: B, c: C) :- e(src: A, dst: B), e(src: B, dst: C), e(src: A, dst: C).",
}

KEPT = {
    "a column projected away": "r(x: X) :- a(x: X, y: Y).",
    "two rules": "r(x: X) :- b(x: X).\nr(x: X) :- a(x: X, y: X).",
    "recursive": "r(x: X, y: Y) :- a(x: X, y: Y).\nr(x: X, y: Z) :- r(x: X, y: Y), a(x: Y, y: Z).",
    "count projected away": "r(x: X) :- b(x: X), N := count : a(x: X), N > 1.",
    "a repeated variable": "r(x: X) :- a(x: X, y: X).",
    "an ordered view": "r(x: X, y: Y) :- a(x: X, y: Y).\nview r(x) order by y desc limit 2.",
}


def root(text: str, relation: str = "r") -> ra.Expr:
    return compile_program(DECLS + text).exprs[relation]


@pytest.mark.parametrize("name", list(DROPPED))
def test_a_set_loses_its_distinct(name: str) -> None:
    assert not isinstance(root(DROPPED[name]), ra.Distinct)


@pytest.mark.parametrize("name", list(KEPT))
def test_a_bag_keeps_its_distinct(name: str) -> None:
    expr = root(KEPT[name])
    if name == "recursive":
        assert isinstance(expr, ra.Recursive)
        assert all(isinstance(body, ra.Distinct) for body in expr.fixpoint.bodies)
    else:
        assert isinstance(expr, ra.Distinct)


def test_next_relations_keep_theirs() -> None:
    program = compile_program("transient source e(x: int).\np(x: X) :- e(x: X).\np(x: X)@next :- p(x: X).\n")
    assert isinstance(program.exprs["p"], ra.Distinct)  # the union with p@next
    assert isinstance(program.exprs["p@ind"], ra.Distinct)


def test_the_vote_view_reads_its_join_without_a_distinct() -> None:
    program = compile_program(open("examples/votes.pomo").read())
    assert not isinstance(program.exprs["articleWithVotes"], ra.Distinct)


def _kept(program: CompiledProgram) -> CompiledProgram:
    """`program` as lowering made it: every Distinct in place."""
    return CompiledProgram(program.checked, lower(program.checked), program.aggregates)


SOURCES = {"a": ("x", "y"), "b": ("x",), "e": ("src", "dst")}


@pytest.mark.parametrize("partial", [True, False])
@pytest.mark.parametrize("name", list(DROPPED) + list(KEPT))
def test_without_the_distinct_the_answers_are_the_same(name: str, partial: bool) -> None:
    """Random batches of inserts and deletes, applied as presence changes as a server's
    source indexes do; after each, the relation read whole and by its first attribute equals
    the plan with every Distinct kept (partial readers miss, upquery and drop as usual)."""
    dropped = compile_program(DECLS + {**DROPPED, **KEPT}[name])
    graphs = [ProgramGraph(dropped, partial=partial), ProgramGraph(_kept(dropped), partial=partial)]
    store: dict[str, set[Row]] = {source: set() for source in SOURCES}

    def fetch(source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
        return list(fetch_from(store[source], SOURCES[source], names, keys, filters))

    first = (dropped.relations["r"].attributes[0],)
    rng = random.Random(name)
    for _ in range(30):
        changes: dict[str, ZSet[Row]] = {}
        for source, attributes in SOURCES.items():
            delta: ZSet[Row] = ZSet()
            for _ in range(rng.randrange(6)):
                row = tuple(rng.randrange(4) for _ in attributes)
                if rng.random() < 0.7 and row not in store[source]:
                    store[source].add(row)
                    delta.add(row, 1)
                elif row in store[source]:
                    store[source].discard(row)
                    delta.add(row, -1)
            changes[source] = delta
        answers = []
        for graph in graphs:
            graph.step(changes)
            whole = sorted(graph.lookup("r", (), [()], fetch)[0])
            keyed = [sorted(rows) for rows in graph.lookup("r", first, [(k,) for k in range(4)], fetch)]
            answers.append((whole, keyed))
        assert answers[0] == answers[1]
