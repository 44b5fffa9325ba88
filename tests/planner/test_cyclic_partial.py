"""Cyclic rule bodies under the partial-state invariant driver (test_partial_invariants.py's
run_case): cyclic_programs.generate_cyclic's programs, looked up by random attribute sets
through partial readers (over the full WcojJoin when the planner is free, over binary joins
when they are forced), with writes (cyclic_batch's, dense enough for cycles), held and
overlapping upqueries and evictions interleaved. Every completed lookup equals the fully
materialized graph's answer (planned the same way), the graph's invariants hold after every
step and invariant 1 at quiescence, and the fully materialized graph equals clingo after
every write.

Larger sweep (slow): `POMOVIEW_CYCLIC_PARTIAL_SWEEP=1000 .venv/bin/python -m pytest -m slow
tests/planner/test_cyclic_partial.py`. Replay one: `python test_cyclic_partial.py SEED [binary|sliced]`.
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cyclic_programs import cyclic_batch, generate_cyclic  # noqa: E402
from random_programs import Batch, Program, Store  # noqa: E402
from test_partial_invariants import run_case  # noqa: E402

SWEEP = int(os.environ.get("POMOVIEW_CYCLIC_PARTIAL_SWEEP", "400"))
CI_CASES = 60
# (binary joins forced, sources through slices): a keyed reader of a cyclic view over sliced
# sources takes the demand transformation (planner/demand/readers.py).
PLANNERS = {"planner free": (False, False), "binary joins": (True, False), "sliced sources": (False, True)}
CASES = {"planner free": CI_CASES, "binary joins": CI_CASES, "sliced sources": CI_CASES // 2}


def dense(rng: random.Random, program: Program, store: Store) -> Batch:
    return cyclic_batch(rng, program, store, first=not any(store.values()))


def run_cyclic(seed: int, planner: tuple[bool, bool], steps: int = 30) -> Counter[str]:
    """One driver case over the cyclic program of `seed` (its own generator's stream: the
    driver's draws start from the seed as for any other program)."""
    program = generate_cyclic(random.Random(f"cyclic/{seed}"))
    binary_joins, sliced = planner
    return run_case(
        seed,
        steps,
        source=program,
        binary_joins=binary_joins,
        sliced=sliced,
        clingo_every_write=True,
        batches=dense,
    )


# What the CI cases must have exercised, or they have gone soft.
MUST_SEE = (
    "lookups with rows",
    "lookups completed epochs after they began",
    "fetches held back",
    "overlapping lookups",
    "memory evictions",
    "partial TopK",
)


@pytest.mark.parametrize("planner", list(PLANNERS))
def test_cyclic_partial_state_matches_full(planner: str) -> None:
    seen: Counter[str] = Counter()
    cases = CASES[planner]
    for seed in range(cases):
        seen.update(run_cyclic(seed, PLANNERS[planner]))
    assert seen["cases"] == cases
    missed = [what for what in MUST_SEE if not seen[what]]
    assert not missed, f"never exercised: {missed}"
    if PLANNERS[planner][0]:
        assert not seen["WcojJoin"], "a WcojJoin with binary joins forced"
    else:
        assert seen["WcojJoin"] >= cases // 2, f"only {seen['WcojJoin']} WcojJoins in {cases} cases"
    # Sliced: keyed readers of cyclic (not recursive) views through the demand transformation.
    demanded = seen["demanded readers of cyclic views"]
    assert (demanded >= cases // 4) if PLANNERS[planner][1] else not demanded, f"{demanded} in {cases} cases"


@pytest.mark.slow
@pytest.mark.parametrize("planner", list(PLANNERS))
def test_cyclic_partial_state_sweep(planner: str) -> None:
    seen: Counter[str] = Counter()
    for seed in range(10_000, 10_000 + SWEEP):
        seen.update(run_cyclic(seed, PLANNERS[planner], steps=40))
    assert seen["cases"] == SWEEP


if __name__ == "__main__":
    print(dict(run_cyclic(int(sys.argv[1]), (sys.argv[2:3] == ["binary"], sys.argv[2:3] == ["sliced"]))))
