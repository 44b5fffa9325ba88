"""Cyclic rule bodies against clingo: the Engine with the planner free (cyclic bodies as a
WcojJoin, planner/ir/cyclic.py) and with binary joins forced (`binary_joins=True`), each
compared with clingo after install and after every write batch (inserts and deletes).

The programs are cyclic_programs.generate_cyclic's (triangles, 4-cycles, 4-cycles with a
chord and 4-cliques over sources and derived relations, with constants, comparisons and
negation), the writes cyclic_batch's; the harness is test_engine_oracle.py's: one engine reads
every relation at every epoch, a second builds whole and keyed (partial) readers at random
epochs and keeps reading them. A failure prints the seed, the program, its clingo
translation, the batches and a minimized case. Replay one by hand:

    .venv/bin/python tests/planner/test_cyclic_oracle.py SEED [binary]

Larger sweep (slow): `POMOVIEW_CYCLIC_SWEEP=2000 .venv/bin/python -m pytest -m slow
tests/planner/test_cyclic_oracle.py`.
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cyclic_programs import SHAPES, cyclic_batch, generate_cyclic  # noqa: E402
from random_programs import (  # noqa: E402
    Agg,
    Batch,
    Cmp,
    Neg,
    Pos,
    Program,
    Rule,
    Store,
    Var,
    apply,
    evaluate_epochs,
    solve_epochs,
)
from test_engine_oracle import (  # noqa: E402
    Case,
    EngineLike,
    check,
    describe,
    lookup_plans,
    real_engine,
    run,
    sliced_engine,
)

from pomoview.engine.engine import Engine  # noqa: E402
from pomoview.planner.compile import compile_program  # noqa: E402
from pomoview.planner.ir import ra  # noqa: E402
from pomoview.planner.ir.cyclic import multi_joins  # noqa: E402

SWEEP = int(os.environ.get("POMOVIEW_CYCLIC_SWEEP", "1000"))
CI_SEEDS = 64
EPOCHS = 8


def binary_engine(text: str, filename: str) -> EngineLike:
    """The engine with every rule body planned as binary joins (no WcojJoin)."""
    return Engine(text, filename=filename, binary_joins=True)


FACTORIES = {"planner free": real_engine, "binary joins": binary_engine, "sliced sources": sliced_engine}


def cyclic_case(seed: int, epochs: int = EPOCHS) -> Case:
    """The case of `seed`: every fourth with time (a transient source and `@next` rules)."""
    rng = random.Random(seed)
    program = generate_cyclic(rng, temporal=seed % 4 == 3)
    store: Store = {s: set() for s in program.sources}
    batches: list[Batch] = []
    for epoch in range(epochs):
        batch = cyclic_batch(rng, program, store, first=epoch == 0)
        apply(store, batch, program.transient)
        batches.append(batch)
    return Case(seed, program, batches, lookup_plans(rng, program, epochs))


@pytest.mark.parametrize("planner", list(FACTORIES))
@pytest.mark.parametrize("seed", range(CI_SEEDS))
def test_cyclic_programs_match_clingo(seed: int, planner: str) -> None:
    check(cyclic_case(seed), FACTORIES[planner])


@pytest.mark.slow
@pytest.mark.parametrize("planner", list(FACTORIES))
@pytest.mark.parametrize("seed", range(100_000, 100_000 + SWEEP))
def test_cyclic_programs_match_clingo_sweep(seed: int, planner: str) -> None:
    check(cyclic_case(seed, 12), FACTORIES[planner])


def _planned(program: Program) -> Iterator[ra.Expr]:
    """Each expression of the program's plans after the cyclic pass, once."""
    exprs = multi_joins(compile_program(program.pomo()).exprs)
    seen: set[int] = set()
    stack: list[ra.Expr] = list(exprs.values())
    while stack:
        expr = stack.pop()
        if id(expr) not in seen:
            seen.add(id(expr))
            yield expr
            stack.extend(ra.children(expr))


def multi_join_count(program: Program, negated: bool = False) -> int:
    """How many MultiJoins the planner's cyclic pass makes of the program's rule bodies
    (with `negated`: those holding a negated atom, tested inside the WcojJoin)."""
    return sum(
        isinstance(expr, ra.MultiJoin) and (not negated or bool(expr.negated)) for expr in _planned(program)
    )


def renamed_shares(program: Program) -> int:
    """How many rule bodies read another's MultiJoin under a Project renaming its columns
    (the cyclic pass's sharing up to variable names; the family's twins)."""
    count = 0
    for expr in _planned(program):
        # Variables are capitalized and attributes not: a head's projection names attributes.
        if isinstance(expr, ra.Project) and isinstance(expr.input, ra.MultiJoin):
            variables = [name for name, _ in expr.outputs if name[:1].isupper()]
            count += bool(variables) and not set(variables) & set(expr.input.variables)
    return count


def _operators(engine: Engine) -> Counter[str]:
    return Counter(info.operator for info in engine.graph.graph.node_infos())


def test_the_cyclic_family_gets_multi_joins_that_find_rows() -> None:
    """The CI seeds are not vacuous: nearly every program gets a MultiJoin, built as a
    WcojJoin when the planner is free and never when binary joins are forced; most negate
    inside one (a negated atom of the WcojJoin, cyclic.py); some share one renamed (a twin,
    cyclic_programs.py); most cyclic
    relations hold rows at some epoch; and the bodies use what the family is meant to cover."""
    with_multi = with_negated = with_rows = cyclic_relations = with_renamed = 0
    seen: Counter[str] = Counter()
    for seed in range(CI_SEEDS):
        case = cyclic_case(seed)
        program = case.program
        with_multi += multi_join_count(program) > 0
        with_negated += multi_join_count(program, negated=True) > 0
        with_renamed += renamed_shares(program) > 0
        free, binary = Engine(program.pomo()), Engine(program.pomo(), binary_joins=True)
        for name in program.derived:
            free.read(name)
            binary.read(name)
        seen["WcojJoin"] += _operators(free)["WcojJoin"]
        assert not _operators(binary)["WcojJoin"], f"seed {seed}: a WcojJoin under binary_joins"
        answers = solve_epochs(program, case.batches)
        for rule in program.rules:
            seen.update(_features(program, rule))
        for name in {rule.head for rule in program.rules if cyclic_shape(rule)}:
            cyclic_relations += 1
            with_rows += any(answer[name] for answer in answers)
    assert with_multi >= 0.9 * CI_SEEDS, f"{with_multi} of {CI_SEEDS} programs got a MultiJoin"
    assert seen["WcojJoin"] >= with_multi
    assert with_negated >= 0.5 * CI_SEEDS, f"{with_negated} of {CI_SEEDS} programs negate inside a MultiJoin"
    assert with_rows >= 0.6 * cyclic_relations, f"{with_rows} of {cyclic_relations} cyclic relations had rows"
    assert with_renamed >= 0.1 * CI_SEEDS, f"{with_renamed} of {CI_SEEDS} programs share a join renamed"
    wanted = {*SHAPES, "constant", "comparison", "constant comparison", "negation", "negated derived"}
    wanted |= {"derived edge", "recursive edge", "several relations", "one relation", "union"}
    wanted |= {"aggregate", "recursion over it"}
    assert set(seen) >= wanted, wanted - set(seen)


def cyclic_shape(rule: Rule) -> str | None:
    """The shape of a rule generate_cyclic made cyclic, from the pairs of A-D its atoms hold
    (None for the other rules)."""
    pairs = set()
    for lit in rule.body:
        if isinstance(lit, Pos):
            cycle = sorted({v for v in lit.atom.variables() if v in "ABCD"})
            if len(cycle) == 2:
                pairs.add("".join(cycle))
    for name, edges in sorted(SHAPES.items(), key=lambda item: -len(item[1])):
        if {"".join(sorted(e)) for e in edges} <= pairs:
            return name
    return None


def _features(program: Program, rule: Rule) -> set[str]:
    shape = cyclic_shape(rule)
    if shape is None:
        return set()
    positives = [lit.atom for lit in rule.body if isinstance(lit, Pos)]
    relations = {atom.relation for atom in positives}
    out = {shape, "one relation" if len(relations) == 1 else "several relations"}
    recursive = {
        r.head for r in program.rules if r.head in {x.atom.relation for x in r.body if isinstance(x, Pos)}
    }
    if relations & recursive:
        out.add("recursive edge")
    if relations & (set(program.derived) - recursive):
        out.add("derived edge")
    if any(not isinstance(t, Var) for atom in positives for _, t in atom.args):
        out.add("constant")
    for lit in rule.body:
        if isinstance(lit, Cmp):
            both = isinstance(lit.lhs, Var) and isinstance(lit.rhs, Var)
            out.add("comparison" if both else "constant comparison")
        if isinstance(lit, Neg):
            out.add("negated derived" if lit.atom.relation in program.derived else "negation")
    if sum(r.head == rule.head for r in program.rules) > 1:
        out.add("union")
    if any(isinstance(lit, Agg) for lit in rule.body):
        out.add("aggregate")
    if any(
        rule.head in {x.atom.relation for x in r.body if isinstance(x, Pos)}
        for r in program.rules
        if r.head in recursive
    ):
        out.add("recursion over it")
    return out


@pytest.mark.parametrize("seed", range(12))
def test_translation_matches_naive_evaluator(seed: int) -> None:
    """clingo (through the translation) and the naive evaluator agree on the cyclic family:
    checks the oracle itself on these bodies."""
    case = cyclic_case(5000 + seed, epochs=4)
    want, got = solve_epochs(case.program, case.batches), evaluate_epochs(case.program, case.batches)
    assert want == got, f"seed {5000 + seed}\n{case.program.pomo()}\n{case.program.clingo()}"


if __name__ == "__main__":
    seed = int(sys.argv[1])
    factory = binary_engine if sys.argv[2:3] == ["binary"] else real_engine
    case = cyclic_case(seed)
    failure = run(case, factory)
    print(f"seed {seed} passes" if failure is None else describe(case, failure))
