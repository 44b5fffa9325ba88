"""Noria's four invariants under random interleavings, in process (no Spark, no server).

Each case is a random program (random_programs.py, or a web-app shape with join chains),
views looked up by RANDOM attribute sets, and a random interleaving of:
- writes (inserts and deletes, at present and at missing keys);
- lookups that start, need fetches, and wait while other steps run: their fetches are
  answered only when the lookup runs again, from the sources as they are then (the
  server's keyed Spark job at a snapshot plus the logged writes after it), so writes race
  the upqueries, and several lookups of overlapping keys are in flight at once.

Checked:
- every lookup that completes equals the fully materialized graph's answer at that epoch;
- after every step: each join's present keyed rows have their join keys present on the
  other side, and prefix presence (invariant 4) along every path (Graph.check_invariants);
- at quiescence: every present key of every partial state equals a from-scratch
  computation of its input for that key (invariant 1; partial_model.Model.check_states).
Invariant 2 (no partial updates) and 3 (snapshots) are what make these hold; a failure
prints the seed, the program and the steps. Replay one: `python test_partial_invariants.py SEED`.
Larger sweep (slow): `POMOVIEW_PARTIAL_SWEEP=3000 .venv/bin/python -m pytest -m slow
tests/planner/test_partial_invariants.py`.
"""

from __future__ import annotations

import os
import random
import sys
import traceback
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from partial_model import Model, Pending  # noqa: E402
from random_programs import INT_DOMAIN, STR_DOMAIN, generate, random_batch  # noqa: E402

from pomoview.planner.compile import compile_program  # noqa: E402
from pomoview.planner.errors import ProgramError  # noqa: E402

WEB = """
source a(x: int, y: int).
source b(y: int, z: int).
source c(z: int, w: int).
chain(x: X, y: Y, z: Z, w: W) :- a(x: X, y: Y), b(y: Y, z: Z), c(z: Z, w: W).
star(y: Y, x: X, z: Z) :- a(x: X, y: Y), b(y: Y, z: Z), !c(z: Y).
either(x: X, v: V) :- a(x: X, y: V).
either(x: X, v: V) :- chain(x: X, w: V).
counted(y: Y, n: N) :- b(y: Y), N := count : a(y: Y).
summed(x: X, s: S) :- a(x: X, y: Y), S := sum W : c(z: Y, w: W).
"""


class WebProgram:
    """The fixed web-app schema, in the shape random_programs' Program offers the driver."""

    sources = {
        "a": (("x", "int"), ("y", "int")),
        "b": (("y", "int"), ("z", "int")),
        "c": (("z", "int"), ("w", "int")),
    }
    transient: set[str] = set()

    def pomo(self) -> str:
        return WEB


def run_case(seed: int, steps: int = 30) -> None:
    rng = random.Random(seed)
    source_program = WebProgram() if seed % 3 == 0 else generate(rng)
    text = source_program.pomo()
    try:
        program = compile_program(text)
    except ProgramError:
        return
    model = Model(program)
    derived = sorted(n for n, r in program.relations.items() if r.kind == "derived")
    if not derived:
        return
    log: list[str] = []
    pending: list[Pending] = []

    def domain(relation: str, attribute: str) -> tuple[object, ...]:
        return STR_DOMAIN if program.relations[relation].types[attribute] == "string" else INT_DOMAIN

    def finish(p: Pending) -> bool:
        rows = model.attempt(p)
        if rows is None:
            return False
        want = model.reference(p.view, p.key, p.values)
        got = [set(r) for r in rows]
        assert got == want, f"lookup {p.view} by {p.key} {p.values}: got {got}, want {want}"
        return True

    try:
        for step in range(steps):
            roll = rng.random()
            if roll < 0.4:
                batch = random_batch(rng, source_program, model.store)  # type: ignore[arg-type]
                log.append(f"{step}: write {batch}")
                model.write(batch)
            elif roll < 0.75 or not pending:
                view = rng.choice(derived)
                attrs = program.relations[view].attributes
                chosen = set(rng.sample(attrs, rng.randint(1, len(attrs)))) if attrs else set()
                key = tuple(a for a in attrs if a in chosen)
                values = [tuple(rng.choice(domain(view, a)) for a in key) for _ in range(rng.randint(1, 3))]
                if rng.random() < 0.1:
                    key, values = (), [()]  # the whole relation (a full reader)
                p = model.begin(view, key, values)
                log.append(f"{step}: begin {view} by {key} {values}")
                if not finish(p):
                    pending.append(p)
            else:
                p = pending.pop(rng.randrange(len(pending)))
                log.append(f"{step}: answer {p.view} by {p.key} {p.values} ({len(p.requests)} fetches)")
                if not finish(p):
                    pending.append(p)
            model.check_graph()
        rounds = 0
        while pending:
            rounds += 1
            assert rounds < 200, "upqueries did not settle"
            p = pending.pop(0)
            log.append(f"drain: answer {p.view} by {p.key} {p.values}")
            if not finish(p):
                pending.append(p)
            model.check_graph()
        model.check_states()
    except Exception:
        raise AssertionError(
            f"seed {seed}\n--- program ---\n{text}\n--- steps ---\n" + "\n".join(log)
            + "\n--- failure ---\n" + traceback.format_exc()
        ) from None


CI_CASES = 600


@pytest.mark.parametrize("block", range(8))
def test_partial_state_matches_full_under_interleavings(block: int) -> None:
    for seed in range(block, CI_CASES, 8):
        run_case(seed)


@pytest.mark.slow
def test_partial_state_sweep() -> None:
    count = int(os.environ.get("POMOVIEW_PARTIAL_SWEEP", "2000"))
    for seed in range(10_000, 10_000 + count):
        run_case(seed, steps=40)


if __name__ == "__main__":
    run_case(int(sys.argv[1]))
    print("ok")
