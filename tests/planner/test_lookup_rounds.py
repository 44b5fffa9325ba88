"""A lookup in rounds (planner/compile.py's PendingLookup over dataflow/upquery.py's Walk):
its misses come back as data, and the next round resumes where the walk stopped, so the
number of rounds follows the plan's depth of dependent upqueries, and the node visits of
all rounds together are linear in the plan's size (a walk restarted from the reader at
every round visits O(n^2) nodes on a chain of n joins)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from partial_model import Model  # noqa: E402

from pomoview.planner.compile import compile_program  # noqa: E402


def join_chain(n: int) -> str:
    """A path through n sources, each joined on the previous one's `b`: every join's other
    side is a fetch that only the previous join's answer names (a dependent upquery)."""
    sources = "\n".join(f"source s{i}(a: int, b: int)." for i in range(n))
    body = ", ".join(f"s{i}(a: X{i}, b: X{i + 1})" for i in range(n))
    return f"{sources}\nview v(a).\nv(a: X0, b: X{n}) :- {body}.\n"


def intersection(n: int) -> str:
    """The issue's minimal wide case: one variable through n sources, and a view with no key."""
    sources = "\n".join(f"source s{i}(z: int)." for i in range(n))
    body = ", ".join(f"s{i}(z: Z)" for i in range(n))
    return f"{sources}\nview v().\nv(z: Z) :- {body}.\n"


def run_to_answer(
    m: Model, view: str, key: tuple[str, ...], keys: list[tuple[int, ...]]
) -> tuple[int, int, list]:
    """Attempts the lookup until it answers; (rounds, node visits in all rounds, rows)."""
    pending = m.begin(view, key, keys)
    for attempt in range(1, 10_000):
        rows = m.attempt(pending)
        if rows is not None:
            return attempt, pending.steps, rows
    raise AssertionError("the lookup did not settle")


@pytest.mark.parametrize("n", [8, 32, 128])
def test_a_chain_of_n_dependent_joins_takes_n_plus_one_rounds_and_linear_visits(n: int) -> None:
    m = Model(compile_program(join_chain(n)))
    m.write({f"s{i}": {(i, i + 1): 1, (i + 100, i + 101): 1} for i in range(n)})
    rounds, steps, rows = run_to_answer(m, "v", ("a",), [(0,)])
    assert [set(r) for r in rows] == m.reference("v", ("a",), [(0,)]) == [{(0, n)}]
    assert rounds <= n + 1
    nodes = len(m.partial.graph.nodes)
    # Each node's step starts about once in all; a walk that restarts from the reader at each
    # round starts about nodes * rounds / 2 of them.
    assert steps <= 2 * nodes, (steps, nodes, rounds)


@pytest.mark.parametrize("n", [64, 120])
def test_a_view_that_intersects_n_sources_answers_in_one_round_of_fetches(n: int) -> None:
    """The issue's case: `view v().` over 64 sources failed after 64 rounds, one source's
    fetch each; every full source index of a new reader names its fetch in the same round."""
    m = Model(compile_program(intersection(n)))
    m.write({f"s{i}": {(1,): 1, (i + 2,): 1} for i in range(n)})
    rounds, _, rows = run_to_answer(m, "v", (), [()])
    assert [set(r) for r in rows] == m.reference("v", (), [()]) == [{(1,)}]
    assert rounds == 2  # one round names every fetch, the next answers
