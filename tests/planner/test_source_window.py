"""Ordered views whose fills fetch only each key's first rows (SourceWindow), under the
interleavings of test_partial_invariants.py: random writes, lookups whose windowed fetches
answer late (the job's first tuples from a snapshot, the writes since from the log, as the
server's at_hand.py advances them), evictions; every lookup against the fully materialized
graph, every state against a from-scratch computation (partial_model.py).

Also the planner's decision (planner/ir/windows.py), which views get a window and why not.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_partial_invariants import run_case  # noqa: E402

from pomoview.dataflow.node import fetch_from  # noqa: E402
from pomoview.dataflow.operators.source_window import SourceWindow  # noqa: E402
from pomoview.dataflow.operators.top_k import TopK  # noqa: E402
from pomoview.dataflow.zset import ZSet  # noqa: E402
from pomoview.planner.compile import ProgramGraph, compile_program  # noqa: E402
from pomoview.planner.ir.windows import SourceWindowPlan, Whole, source_window  # noqa: E402

WINDOWS = """
source s(k: int, a: int, b: string).
source t(k: int, f: int, g: int).
copy(k: K, a: A, b: B) :- s(k: K, a: A, b: B).
turned(b: B, a: A, k: K) :- s(k: K, a: A, b: B).
picked(k: K, a: A) :- s(k: K, a: A, b: "b").
fixed(k: K, g: G) :- t(k: K, f: 2, g: G).
dropped(k: K, a: A) :- s(k: K, a: A).
view copy(k) order by a desc, b limit 2.
view turned(b) order by k limit 1.
view picked(k) order by a limit 3.
view fixed(k) order by g desc limit 1.
view dropped(k) order by a limit 2.
"""


class WindowProgram:
    """Views that are one source's tuples (and one that is not), in the shape the driver
    takes (random_programs.Program's `sources`, `transient` and `pomo`)."""

    sources = {
        "s": (("k", "int"), ("a", "int"), ("b", "string")),
        "t": (("k", "int"), ("f", "int"), ("g", "int")),
    }
    transient: set[str] = set()

    def pomo(self) -> str:
        return WINDOWS


MUST_SEE = (
    "SourceWindow",
    "SourceWindow cut keys",
    "SourceWindow fills",
    "SourceWindow ran short",
    "windowed fetches",
    "lookups with rows",
    "memory evictions",
    "TopK refills",
)
CASES = 120


@pytest.mark.parametrize("block", range(2))
def test_windows_match_full_under_interleavings(block: int) -> None:
    seen: Counter[str] = Counter()
    seeds = range(block, CASES, 2)
    for seed in seeds:
        seen.update(run_case(seed, steps=40, source=WindowProgram(), random_orders=False))  # type: ignore[arg-type]
    assert seen["cases"] == len(seeds)
    missed = [what for what in MUST_SEE if not seen[what]]
    assert not missed, f"never exercised: {missed} ({dict(seen)})"


def plan_of(view: str) -> SourceWindowPlan | Whole:
    program = compile_program(WINDOWS)
    return source_window(program.plan.exprs[view], program.relations, program.plan.hidden)


def test_which_views_get_a_window() -> None:
    assert plan_of("copy") == SourceWindowPlan("s", ("k", "a", "b"), (0, 1, 2), ())
    assert plan_of("turned") == SourceWindowPlan("s", ("k", "a", "b"), (2, 1, 0), ())
    assert plan_of("picked") == SourceWindowPlan("s", ("k", "a", "b"), (0, 1), (("b", "b"),))
    assert plan_of("fixed") == SourceWindowPlan("t", ("k", "f", "g"), (0, 2), (("f", 2),))
    dropped = plan_of("dropped")
    assert isinstance(dropped, Whole) and "drops the attributes ['b']" in dropped.reason


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ("v(k: K, a: A) :- s(k: K, a: A, b: B), A < 3.", "is not attribute == constant"),
        ("v(k: K, a: A) :- s(k: K, a: A, b: B), u(k: K).", "not from one source's tuples"),
        ("v(k: K, a: A) :- w(k: K, a: A).", "'w' is not a stored source"),
        ("v(k: K, a: A, c: 1) :- s(k: K, a: A, b: B).", "is a constant"),
        ("v(k: K, x: F) :- r(k: K, f: F).", "is a float"),
        ("v(k: K, a: A) :- s(k: K, a: A).", "drops the attributes"),
    ],
)
def test_why_a_view_is_whole(rule: str, why: str) -> None:
    text = (
        "source s(k: int, a: int, b: string).\nsource u(k: int).\nsource r(k: int, f: float).\n"
        "w(k: K, a: A) :- s(k: K, a: A, b: \"x\").\nw(k: K, a: A) :- s(k: K, b: \"y\", a: A).\n"
        f"{rule}\nview v(k) order by k limit 2.\n"
    )
    program = compile_program(text)
    plan = source_window(program.plan.exprs["v"], program.relations, program.plan.hidden)
    assert isinstance(plan, Whole) and why in plan.reason, plan


def test_a_key_fills_with_its_first_rows_and_refills_by_eviction() -> None:
    """The hot key of 40 rows fills with `limit` of them; a delete in the window makes the
    window short, evicts the key here and in the TopK, and the next lookup fetches again."""
    program = compile_program(
        "source s(k: int, a: int).\nv(k: K, a: A) :- s(k: K, a: A).\nview v(k) order by a desc limit 3.\n"
    )
    rows = {(1, a) for a in range(40)} | {(2, 5)}
    asked: list[int] = []

    def fetch(source: str, names: tuple[str, ...], keys: list, filters: tuple) -> list:
        asked.append(len(keys))
        return fetch_from(rows, ("k", "a"), names, keys, filters)

    graph = ProgramGraph(program)
    assert graph.lookup("v", ("k",), [(1,), (2,)], fetch) == [[(1, 39), (1, 38), (1, 37)], [(2, 5)]]
    top = graph.graph.readers[("v", ("k",))]
    assert isinstance(top, TopK)
    window = top.inputs[0]
    assert isinstance(window, SourceWindow)
    assert window.bounds.keys() == {(1,)} and window.fetched_rows == 4  # 3 of key 1, 1 of key 2
    assert len(window.state.get((1,)) or ()) == 3
    assert top.cut == {(1,)}  # 3 rows held, and rows past them above: the TopK knows it
    # An insert past the bound is not held; one before it is, and pushes no refill.
    rows.update({(1, 0 - 1), (1, 50)})
    graph.step({"s": ZSet([((1, -1), 1), ((1, 50), 1)])})
    assert graph.lookup("v", ("k",), [(1,)], fetch) == [[(1, 50), (1, 39), (1, 38)]]
    assert (1, -1) not in (window.state.get((1,)) or {})
    assert (1,) in top.cut  # the TopK's window is cut: rows lie past it, above
    # A delete in a window of 4 rows: the TopK refills its one place from the window above,
    # and stays cut (the window above is).
    rows.discard((1, 50))
    graph.step({"s": ZSet([((1, 50), -1)])})
    assert graph.lookup("v", ("k",), [(1,)], fetch) == [[(1, 39), (1, 38), (1, 37)]]
    assert top.refills == 1 and (1,) in top.cut and window.ran_short == 0
    # Another: fewer than 3 rows up to the bound, the key is evicted here and in the TopK.
    rows.discard((1, 39))
    graph.step({"s": ZSet([((1, 39), -1)])})
    assert window.state.get((1,)) is None and top.state.get((1,)) is None and window.ran_short == 1
    assert graph.short_windows() == [("v", ("k",), [(1,)])] and graph.short_windows() == []
    assert graph.lookup("v", ("k",), [(1,)], fetch) == [[(1, 38), (1, 37), (1, 36)]]


def test_a_bulk_load_evicts_the_windows_of_the_keys_it_touched() -> None:
    """A load's rows never pass through the circuit: the windows of the keys they touch are
    evicted, found by the key's columns in the source's tuples (here the last, `b`, which
    is the view's first)."""
    program = compile_program(WINDOWS)
    rows = {(k, a, b) for k in range(3) for a in range(4) for b in "ab"}

    def fetch(source: str, names: tuple[str, ...], keys: list, filters: tuple) -> list:
        return fetch_from(rows, ("k", "a", "b"), names, keys, filters)

    graph = ProgramGraph(program)
    graph.lookup("turned", ("b",), [("a",), ("b",)], fetch)
    top = graph.graph.readers[("turned", ("b",))]
    window = top.inputs[0]
    assert isinstance(window, SourceWindow) and window.source_key_cols == (2,)
    assert graph.graph.loaded_keys_needed("s") == [(2,)]
    loaded = {(-1, 9, "a")}  # first in the view's order (k ascending)
    rows |= loaded
    assert graph.graph.evict_loaded("s", {(2,): [("a",)]})
    assert window.state.get(("a",)) is None and top.state.get(("a",)) is None
    assert window.state.get(("b",)) is not None and top.state.get(("b",)) is not None
    assert graph.lookup("turned", ("b",), [("a",)], fetch) == [[("a", 9, -1)]]
