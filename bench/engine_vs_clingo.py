"""The in-process engine against clingo on recursive programs with negation, one edge at a time.

    .venv/bin/python bench/engine_vs_clingo.py [--nodes 300] [--edges 900] [--steps 30] [--seed 20261121]

Program: `reach` (transitive closure avoiding blocked nodes: recursion and negation across
strata) and `fanout` (a count over the recursive relation, grouped by source node). The
engine installs it, loads a random graph in one write and builds a full reader of every
relation; then each step inserts or deletes one random edge (alternating) and the engine's
`write` is timed: the incremental update of every relation. The peer, in the same run: clingo
grounding and solving the same program from scratch over the same edges after each step
(what a non-incremental Datalog engine does per change). Every step's answers are compared,
so the figures are of two engines that agree.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import clingo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pomoview.engine.engine import Engine  # noqa: E402

PROGRAM = """
source edge(src: int, dst: int).
source blocked(node: int).
reach(src: X, dst: Y) :- edge(src: X, dst: Y), !blocked(node: Y).
reach(src: X, dst: Z) :- reach(src: X, dst: Y), edge(src: Y, dst: Z), !blocked(node: Z).
fanout(src: X, n: N) :- edge(src: X), N := count : reach(src: X, dst: Y).
"""

CLINGO = """
reach(X, Y) :- edge(X, Y), not blocked(Y).
reach(X, Z) :- reach(X, Y), edge(Y, Z), not blocked(Z).
has_edge(X) :- edge(X, _).
fanout(X, N) :- has_edge(X), N = #count { Y : reach(X, Y) }.
#show reach/2.
#show fanout/2.
"""


def clingo_answer(edges: set[tuple[int, int]], blocked: set[int]) -> dict[str, set[tuple[int, ...]]]:
    facts = "".join(f"edge({x},{y})." for x, y in edges) + "".join(f"blocked({n})." for n in blocked)
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], CLINGO + facts)
    ctl.ground([("base", [])])
    out: dict[str, set[tuple[int, ...]]] = {"reach": set(), "fanout": set()}
    with ctl.solve(yield_=True) as handle:
        for model in handle:
            for sym in model.symbols(shown=True):
                out[sym.name].add(tuple(a.number for a in sym.arguments))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--edges", type=int, default=900)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=20261121)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    edges: set[tuple[int, int]] = set()
    while len(edges) < args.edges:
        edges.add((rng.randrange(args.nodes), rng.randrange(args.nodes)))
    blocked = set(rng.sample(range(args.nodes), args.nodes // 20))

    engine = Engine(PROGRAM)
    started = time.perf_counter()
    engine.write(
        insert={
            "edge": [{"src": x, "dst": y} for x, y in sorted(edges)],
            "blocked": [{"node": n} for n in sorted(blocked)],
        }
    )
    answer = {name: engine.read(name) for name in ("reach", "fanout")}
    initial_engine = time.perf_counter() - started
    started = time.perf_counter()
    expected = clingo_answer(edges, blocked)
    initial_clingo = time.perf_counter() - started
    assert answer == expected, "the engine and clingo disagree on the initial graph"

    engine_ms: list[float] = []
    clingo_ms: list[float] = []
    for step in range(args.steps):
        if step % 2 == 0:
            edge = (rng.randrange(args.nodes), rng.randrange(args.nodes))
            while edge in edges:
                edge = (rng.randrange(args.nodes), rng.randrange(args.nodes))
            edges.add(edge)
            change = {"insert": {"edge": [{"src": edge[0], "dst": edge[1]}]}}
        else:
            edge = rng.choice(sorted(edges))
            edges.discard(edge)
            change = {"delete": {"edge": [{"src": edge[0], "dst": edge[1]}]}}
        started = time.perf_counter()
        engine.write(**change)
        engine_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        expected = clingo_answer(edges, blocked)
        clingo_ms.append((time.perf_counter() - started) * 1000)
        got = {name: engine.read(name) for name in ("reach", "fanout")}
        assert got == expected, f"the engine and clingo disagree after step {step}"

    pairs = len(expected["reach"])
    print(f"graph: {args.nodes} nodes, {len(edges)} edges, {len(blocked)} blocked; reach has {pairs:,} pairs")
    print()
    print("| what | engine ms | clingo ms (from scratch) | clingo / engine |")
    print("|---|---:|---:|---:|")
    print(
        f"| initial load and first answer | {initial_engine * 1000:,.0f} | {initial_clingo * 1000:,.0f} "
        f"| {initial_clingo / initial_engine:.2f}x |"
    )
    for label, pick in (("one-edge change, median", statistics.median), ("one-edge change, max", max)):
        e, c = pick(engine_ms), pick(clingo_ms)
        print(f"| {label} | {e:,.1f} | {c:,.1f} | {c / e:.1f}x |")


if __name__ == "__main__":
    main()
