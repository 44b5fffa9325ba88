"""An Andersen-style points-to analysis: the engine against clingo, from scratch and per change.

    .venv/bin/python bench/points_to.py [--facts 50000] [--reps 2] [--updates 4] [--seed 25]

The program (issue 25's whole-program shape: two relations mutually recursive through joins):

    pointsTo(V, O)     :- alloc(V, O).
    pointsTo(A, O)     :- assign(A, B), pointsTo(B, O).              (a = b)
    pointsTo(A, O)     :- load(A, B), pointsTo(B, P), heap(P, O).     (a = *b)
    heap(P, O)         :- store(A, B), pointsTo(A, P), pointsTo(B, O). (*a = b)

Facts (seeded): `--facts` of them over `--density` * `--facts` variables, a quarter
allocations (each its own object), 45% assignments, 15% loads and 15% stores; the two
variables of an assignment, load or store are at most `--window` apart, as a program's
variables mostly meet within a function. The density sets how far values flow: at 50,000
facts, 0.7 (the default) derives about 200,000 tuples; below about 0.6 nearly every variable
reaches nearly every object (a closure of a few million tuples, minutes for both).

Targets, alternated `--reps` times (A B A B), medians in the table:
- pomoview: the in-process engine (pomoview.engine, the circuits the server runs, every
  relation full) installs the program, writes every fact in one write and reads both
  relations; its memory is the process's RSS growth over that (the first rep's);
- clingo, in the same process: grounds and solves the same rules over the same facts.
Both answers are compared (every tuple of both relations). Then `--updates` one-fact changes
on the engine, alternately inserting a new assignment and deleting an existing one, each
timed and checked against clingo recomputing from scratch; the ratio is the engine's
from-scratch time over the change's.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import clingo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transitive_closure import rss_mib  # noqa: E402  (bench/ is this script's folder)

from pomoview.engine.engine import Engine  # noqa: E402

PROGRAM = """
source alloc(var: int, obj: int).
source assign(dst: int, src: int).
source load(dst: int, base: int).
source store(base: int, src: int).
pointsTo(var: V, obj: O) :- alloc(var: V, obj: O).
pointsTo(var: A, obj: O) :- assign(dst: A, src: B), pointsTo(var: B, obj: O).
pointsTo(var: A, obj: O) :- load(dst: A, base: B), pointsTo(var: B, obj: P), heap(obj: P, target: O).
heap(obj: P, target: O) :- store(base: A, src: B), pointsTo(var: A, obj: P), pointsTo(var: B, obj: O).
"""

CLINGO = """
pointsTo(V, O) :- alloc(V, O).
pointsTo(A, O) :- assign(A, B), pointsTo(B, O).
pointsTo(A, O) :- load(A, B), pointsTo(B, P), heap(P, O).
heap(P, O) :- store(A, B), pointsTo(A, P), pointsTo(B, O).
#show pointsTo/2.
#show heap/2.
"""

RELATIONS = ("pointsTo", "heap")
COLUMNS = {
    "alloc": ("var", "obj"),
    "assign": ("dst", "src"),
    "load": ("dst", "base"),
    "store": ("base", "src"),
}
Facts = dict[str, set[tuple[int, int]]]
Answer = dict[str, set[tuple[int, ...]]]


def generate(facts: int, window: int, seed: int, density: float = 0.7) -> Facts:
    """The seeded facts (see the module docstring)."""
    rng = random.Random(seed)
    variables = max(2, int(facts * density))
    out: Facts = {"alloc": set(), "assign": set(), "load": set(), "store": set()}

    def near(v: int) -> int:
        return (v + rng.randint(-window, window)) % variables

    shares = (("alloc", 0.25), ("assign", 0.45), ("load", 0.15), ("store", 0.15))
    for name, share in shares:
        target = int(facts * share)
        while len(out[name]) < target:
            v = rng.randrange(variables)
            out[name].add((v, len(out[name])) if name == "alloc" else (v, near(v)))
    return out


def clingo_answer(facts: Facts) -> tuple[Answer, float]:
    """clingo's answer and its time to ground and solve (the facts' text built beforehand)."""
    text = "".join(f"{name}({a},{b})." for name, rows in facts.items() for a, b in rows)
    started = time.perf_counter()
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], CLINGO + text)
    ctl.ground([("base", [])])
    out: Answer = {name: set() for name in RELATIONS}
    with ctl.solve(yield_=True) as handle:
        for model in handle:
            for sym in model.symbols(shown=True):
                out[sym.name].add(tuple(a.number for a in sym.arguments))
    return out, time.perf_counter() - started


def _rows(name: str, rows: set[tuple[int, int]]) -> list[dict[str, int]]:
    a, b = COLUMNS[name]
    return [{a: x, b: y} for x, y in sorted(rows)]


def engine_answer(facts: Facts) -> tuple[Engine, Answer, float]:
    """A new engine with every fact written, its answer and its time (install to last read)."""
    started = time.perf_counter()
    engine = Engine(PROGRAM)
    engine.write(insert={name: _rows(name, rows) for name, rows in facts.items()})
    answer = {name: engine.read(name) for name in RELATIONS}
    return engine, answer, time.perf_counter() - started


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=50_000)
    parser.add_argument("--window", type=int, default=40)
    parser.add_argument("--density", type=float, default=0.7)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args(argv)
    facts = generate(args.facts, args.window, args.seed, args.density)
    rng = random.Random(args.seed + 1)
    ours: list[float] = []
    theirs: list[float] = []
    engine: Engine | None = None
    growth = 0.0
    expected: Answer = {}
    for rep in range(args.reps):
        gc.collect()
        before = rss_mib()
        built, answer, seconds = engine_answer(facts)
        ours.append(seconds)
        if rep == 0:
            engine, growth = built, rss_mib() - before
        else:
            del built
        expected, seconds = clingo_answer(facts)
        theirs.append(seconds)
        assert answer == expected, f"rep {rep}: the engine and clingo disagree from scratch"
        print(f"  rep {rep + 1}: pomoview {ours[-1]:.2f} s, clingo {theirs[-1]:.2f} s", flush=True)
    assert engine is not None
    changes: list[tuple[str, float]] = []
    for step in range(args.updates):
        assign = facts["assign"]
        if step % 2 == 0:
            v = rng.randrange(args.facts)
            fact = (v, rng.randrange(args.facts))
            while fact in assign:
                fact = (v, rng.randrange(args.facts))
            assign.add(fact)
            kind, change = "insert", {"insert": {"assign": _rows("assign", {fact})}}
        else:
            fact = rng.choice(sorted(assign))
            assign.discard(fact)
            kind, change = "delete", {"delete": {"assign": _rows("assign", {fact})}}
        started = time.perf_counter()
        engine.write(**change)
        changes.append((kind, time.perf_counter() - started))
        got = {name: engine.read(name) for name in RELATIONS}
        expected = clingo_answer(facts)[0]
        assert got == expected, f"the engine and clingo disagree after change {step} ({kind} {fact})"
    out = {
        "facts": sum(len(r) for r in facts.values()),
        "derived": {name: len(rows) for name, rows in expected.items()},
        "pomoview_s": statistics.median(ours),
        "clingo_s": statistics.median(theirs),
        "rss_growth_mib": growth,
        "changes": changes,
    }
    print_table(out, args)
    return out


def print_table(out: dict[str, Any], args: argparse.Namespace) -> None:
    derived = sum(out["derived"].values())
    print(
        f"\npoints-to, {out['facts']:,} facts (seed {args.seed}, window {args.window}); derived: "
        + ", ".join(f"{name} {n:,}" for name, n in out["derived"].items())
        + f"; medians of {args.reps} alternated reps"
    )
    print("| figure | pomoview (engine) | clingo | pomoview / clingo |")
    print("|---|---:|---:|---:|")
    ours, theirs = out["pomoview_s"], out["clingo_s"]
    print(f"| from scratch, s | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x |")
    per = out["rss_growth_mib"] * 2**20 / max(1, derived)
    print(f"| RSS growth, MiB (bytes per derived tuple) | {out['rss_growth_mib']:,.0f} ({per:,.0f}) | | |")
    for kind, seconds in out["changes"]:
        cheaper = f"{ours / seconds:,.0f}x cheaper than from scratch"
        print(f"| one {kind} of an assignment, ms | {seconds * 1e3:,.1f} | | {cheaper} |")


if __name__ == "__main__":
    main()
