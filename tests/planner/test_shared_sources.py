"""One SourceIndex per source, key columns and filters in a program's graph: the atoms and
rules that read a source alike share its state (and its fetches), against plain Python
after writes; and a reader build that missed leaves no source index behind for the next
build to take (it would have missed the writes between them)."""

from __future__ import annotations

import random
from collections.abc import Iterable

from pomoview.dataflow.node import FetchRequest, Filters, fetch_from
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import ProgramGraph, compile_program

Row = tuple[object, ...]
ATTRIBUTES = {"e": ("src", "dst"), "f": ("v",)}

CLOSURE = """source e(src: int, dst: int).
view reach().
reach(x: X, y: Y) :- e(src: X, dst: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), e(src: Y, dst: Z).
"""

TWO_VIEWS = """source e(src: int, dst: int).
source f(v: int).
view a(x).
view b(x).
view both().
a(x: X, y: Y) :- e(src: X, dst: Y), f(v: Y).
b(x: X, y: Y) :- e(src: X, dst: Y), !f(v: Y).
both(x: X) :- e(src: X, dst: Y), f(v: Y).
"""


class Store:
    """The sources in memory, counting what the graph fetches."""

    def __init__(self) -> None:
        self.rows: dict[str, set[Row]] = {"e": set(), "f": set()}
        self.fetched: list[tuple[str, tuple[str, ...], tuple[Row, ...]]] = []
        self.refuse: set[str] = set()  # sources whose fetches have no answer yet

    def fetch(
        self, source: str, names: tuple[str, ...], keys: list[Row], filters: Filters
    ) -> Iterable[Row] | None:
        if source in self.refuse:
            return None
        self.fetched.append((source, names, tuple(keys)))
        return fetch_from(self.rows[source], ATTRIBUTES[source], names, keys, filters)

    def write(self, graph: ProgramGraph, source: str, inserts: set[Row], deletes: set[Row]) -> None:
        self.rows[source] = (self.rows[source] | inserts) - deletes
        graph.step({source: ZSet({**{r: 1 for r in inserts}, **{r: -1 for r in deletes}})})


def _sources(graph: ProgramGraph) -> list[str]:
    return [n.describe() for n in graph.graph.nodes if isinstance(n, SourceIndex)]


def _closure(edges: set[Row]) -> set[Row]:
    out: set[Row] = set()
    for start in {a for a, _ in edges}:
        seen, todo = set(), [start]
        while todo:
            for a, b in edges:
                if a == todo[-1] and b not in seen:
                    seen.add(b)
                    todo.insert(0, b)
            todo.pop()
        out |= {(start, b) for b in seen}
    return out


def test_a_closure_holds_and_fetches_its_edges_once() -> None:
    store, rng = Store(), random.Random(3)
    graph = ProgramGraph(compile_program(CLOSURE))
    store.rows["e"] = {(rng.randrange(8), rng.randrange(8)) for _ in range(12)}
    assert set(graph.lookup("reach", (), [()], store.fetch)[0]) == _closure(store.rows["e"])
    # The base rule and the recursive rule read e whole: one state, one whole fetch.
    assert _sources(graph) == ["SourceIndex(e by (), full)"]
    assert [f for f in store.fetched if f[0] == "e"] == [("e", (), ((),))]
    for _ in range(15):
        present = sorted(store.rows["e"])
        deletes = set(rng.sample(present, min(len(present), rng.randrange(3))))
        inserts = {(rng.randrange(8), rng.randrange(8)) for _ in range(rng.randrange(3))} - store.rows["e"]
        store.write(graph, "e", inserts, deletes)
        assert set(graph.lookup("reach", (), [()], store.fetch)[0]) == _closure(store.rows["e"])


def test_views_keyed_alike_share_the_source_state_and_its_fetches() -> None:
    store = Store()
    store.rows = {"e": {(1, 2), (1, 3), (2, 3)}, "f": {(2,)}}
    graph = ProgramGraph(compile_program(TWO_VIEWS))
    assert set(graph.lookup("a", ("x",), [(1,)], store.fetch)[0]) == {(1, 2)}
    before = len(store.fetched)
    # b reads e by src and f by v as a does: both present already, nothing fetched.
    assert set(graph.lookup("b", ("x",), [(1,)], store.fetch)[0]) == {(1, 3)}
    assert store.fetched[before:] == []
    shared = ["SourceIndex(e by ('src',), partial)", "SourceIndex(f by ('v',), partial)"]
    assert sorted(_sources(graph)) == shared
    store.write(graph, "f", {(3,)}, {(2,)})
    assert set(graph.lookup("a", ("x",), [(1,)], store.fetch)[0]) == {(1, 3)}
    assert set(graph.lookup("b", ("x",), [(1,)], store.fetch)[0]) == {(1, 2)}


def test_a_build_that_missed_leaves_no_source_index_for_the_next() -> None:
    """`both` reads e and f whole: e's index is loaded, f's fetch has no answer yet, so the
    build is dropped. A write to e comes before the build is tried again; the new build
    must load e afresh (a kept index would have missed that write)."""
    store = Store()
    store.rows = {"e": {(1, 2), (3, 4)}, "f": {(2,), (4,)}}
    graph = ProgramGraph(compile_program(TWO_VIEWS))
    store.refuse = {"f"}
    missed = graph.reader("both", (), store.fetch)
    assert isinstance(missed, list) and all(isinstance(m, FetchRequest) for m in missed)
    store.write(graph, "e", {(5, 4)}, {(1, 2)})
    store.refuse = set()
    assert set(graph.lookup("both", (), [()], store.fetch)[0]) == {(3,), (5,)}
