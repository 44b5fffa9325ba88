"""The in-process Engine against clingo, on random stratified programs and random writes.

Each case (random_programs.py) is a random valid program over 2-3 sources
(int attributes over 0..4, sometimes a string attribute) with joins,
constants, repeated variables, all six comparisons, negation of sources and of
lower derived relations, self and mutual recursion (transitive-closure steps
among them), count/sum/min/max with and without grouping, unions and facts;
then 5-10 random write batches (no-op inserts and deletes included). After
install and after every batch, every relation read through `Engine.read` must
equal clingo's answer computed from scratch over the current base relations,
and partial readers (`Engine.lookup`, first asked at a random epoch) must
return clingo's answer filtered by the key. Values are compared with their
types (1 is not True, 1 is not 1.0).

A second family adds time (pomo_logic §2.1): a transient source and inductive
(`@next`) rules; there clingo runs one epoch at a time, fed what the inductive
rules derived at the previous epoch (random_programs.solve_epochs). A third
adds content ids (§2.2): `K := rel(...)` and derived attributes of type cid;
clingo's CID of a tuple of rel is the term k_rel(values), turned into text by
planner/cid.py, so which tuple a CID names is checked, its encoding is not.

A failure message is a bug report: the seed, the program, its clingo
translation, the batches so far, the store, the diff, and, within a time
budget, a minimized case. To minimize one by hand:

    .venv/bin/python tests/planner/test_engine_oracle.py SEED [EPOCHS]

The translation itself is checked against a naive Python evaluator, and the
harness against a reference engine built on that evaluator (which it must
pass) and a broken one (which it must catch).
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import pytest

from pomoview.planner.frontend.errors import ProgramError

sys.path.insert(0, str(Path(__file__).parent))  # random_programs.py lives next to this file
from random_programs import (  # noqa: E402
    INT_DOMAIN,
    STR_DOMAIN,
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
    batch_text,
    evaluate,
    evaluate_epochs,
    generate,
    generate_negative_cycle,
    random_batch,
    solve_epochs,
    var_type,
    well_formed,
)

# The slow sweep's size; raise it by hand for a long bug hunt, e.g.
# POMOVIEW_ORACLE_SWEEP=5000 pytest -m slow tests/planner/test_engine_oracle.py
SWEEP = int(os.environ.get("POMOVIEW_ORACLE_SWEEP", "400"))
# Seconds a failing case may spend minimizing itself, and for the whole run.
SHRINK_CASE = float(os.environ.get("POMOVIEW_ORACLE_SHRINK", "20"))
_shrink_left = [float(os.environ.get("POMOVIEW_ORACLE_SHRINK_TOTAL", "60"))]
MAX_KEYS = 40  # lookups per partial reader per epoch


class EngineLike(Protocol):
    epoch: int

    def attributes(self, relation: str) -> tuple[str, ...]: ...

    def write(
        self,
        insert: Mapping[str, Iterable[Mapping[str, object]]] = ...,
        delete: Mapping[str, Iterable[Mapping[str, object]]] = ...,
    ) -> int: ...

    def read(self, relation: str) -> set[tuple]: ...

    def lookup(self, relation: str, key: Mapping[str, object]) -> set[tuple]: ...


EngineFactory = Callable[[str, str], EngineLike]  # (text, filename) -> engine


def real_engine(text: str, filename: str) -> EngineLike:
    from pomoview.engine.engine import Engine

    return Engine(text, filename=filename)


def sliced_engine(text: str, filename: str) -> EngineLike:
    """An engine whose recursive views by key read every source through slices fetched by
    demand (issue 25, part 3), as the server does with `--whole-source-rows 0`."""
    from pomoview.engine.engine import Engine

    return Engine(text, filename=filename, whole_source_rows=0)


@dataclass(frozen=True)
class LookupPlan:
    relation: str
    key: tuple[str, ...]  # () = the whole relation through `read`, else partial, through `lookup`
    first_epoch: int  # first asked then (on the second engine), and at every epoch after


@dataclass
class Case:
    seed: int
    program: Program
    batches: list[Batch]  # batch i makes epoch i + 1; epoch 0 is right after install
    lookups: list[LookupPlan] = field(default_factory=list)


@dataclass
class Failure:
    kind: str  # "mismatch", "refused" (ProgramError) or the exception's type name
    epoch: int
    detail: str


def make_case(
    seed: int, epochs: int, max_levels: int = 4, temporal: bool = False, cids: bool = False
) -> Case:
    rng = random.Random(seed)
    program = generate(rng, max_levels, temporal, cids)
    store: Store = {s: set() for s in program.sources}
    batches: list[Batch] = []
    for _ in range(epochs):
        batch = random_batch(rng, program, store)
        apply(store, batch, program.transient)
        batches.append(batch)
    return Case(seed, program, batches, lookup_plans(rng, program, epochs))


def lookup_plans(rng: random.Random, program: Program, epochs: int) -> list[LookupPlan]:
    """The second engine's readers: some derived relations read whole from a random epoch,
    and relations looked up by random attribute sets from a random epoch."""
    lookups: list[LookupPlan] = []
    for rel in program.relations():
        attrs = program.attributes(rel)
        if rel in program.derived and rng.random() < 0.5:
            lookups.append(LookupPlan(rel, (), rng.randint(0, epochs)))  # a full reader built late
        if not attrs or rng.random() < (0.85 if rel in program.sources else 0.4):
            continue
        for _ in range(rng.choice((1, 1, 2))):
            key = tuple(rng.sample(attrs, rng.randint(1, len(attrs))))  # any order, even all
            lookups.append(LookupPlan(rel, key, rng.randint(0, epochs)))
    return lookups


def case_for_seed(seed: int, epochs: int | None = None) -> Case:
    """The case a test runs for `seed`: the seed's range says which family (see the tests)."""
    sweep = seed >= 100_000
    family = (seed % 100_000) // 20_000  # 0: plain, 1: with time, 2: with CIDs (and time if odd)
    temporal = family == 1 or (family == 2 and seed % 2 == 1)
    default = (12 if family == 1 else 10) if sweep else (5 + seed % 4, 6 + seed % 3, 6)[family]
    return make_case(seed, epochs or default, 6 if sweep else 4, temporal, family == 2)


def _tagged(rows: Iterable[tuple]) -> set[tuple]:
    """Rows whose values carry their types, so that 1 == True == 1.0 does not hide a bug."""
    return {tuple((type(v).__name__, v) for v in row) for row in rows}


def _untag(rows: Iterable[tuple]) -> list[tuple]:
    return sorted((tuple(v for _, v in row) for row in rows), key=repr)


def _diff(got: Iterable[tuple], want: set[tuple]) -> str | None:
    got_t, want_t = _tagged(got), _tagged(want)
    if got_t == want_t:
        return None
    return (
        f"  engine only: {_untag(got_t - want_t)}\n"
        f"  clingo only: {_untag(want_t - got_t)}\n"
        f"  clingo:      {_untag(want_t)}"
    )


def _key_values(program: Program, rel: str, attr: str, rows: set[tuple]) -> list[object]:
    type_ = dict(program.schema(rel))[attr]
    col = program.attributes(rel).index(attr)
    bases: dict[str, list[object]] = {"string": [*STR_DOMAIN, "zz"], "cid": ["bnotacid"]}
    base = bases.get(type_, [*INT_DOMAIN, -1])
    return base + sorted({row[col] for row in rows} - set(base), key=repr)


def _write_args(program: Program, batch: Batch) -> tuple[dict, dict]:
    insert: dict[str, list[dict[str, object]]] = {}
    delete: dict[str, list[dict[str, object]]] = {}
    for s, ops in batch.items():
        attrs = program.attributes(s)
        for row, op in ops.items():
            (insert if op > 0 else delete).setdefault(s, []).append(dict(zip(attrs, row, strict=True)))
    return insert, delete


def run(case: Case, factory: EngineFactory = real_engine) -> Failure | None:
    """Replays the case; the first disagreement with clingo, or None.

    Two engines get the same writes: the first reads every relation after
    install and after every batch; the second builds its readers lazily, at
    the plans' epochs (`read` for key (), `lookup` otherwise), and keeps using
    them from then on.
    """
    program = case.program
    answers = solve_epochs(program, case.batches)
    epoch = 0
    try:
        engine = factory(program.pomo(), f"case{case.seed}.pomo")
        lazy = factory(program.pomo(), f"case{case.seed}.pomo") if case.lookups else None
        if engine.epoch != 0:
            return Failure("mismatch", 0, f"epoch after install is {engine.epoch}, not 0")
        for epoch in range(len(case.batches) + 1):
            if epoch > 0:
                batch = case.batches[epoch - 1]
                args = _write_args(program, batch)
                got_epoch = engine.write(*args)
                if lazy is not None:
                    lazy.write(*args)
                if got_epoch != epoch or engine.epoch != epoch:
                    return Failure("mismatch", epoch, f"write returned {got_epoch}, epoch is {engine.epoch}")
            expected = answers[epoch]
            failure = _check_reads(case, engine, expected, epoch)
            if failure is None and lazy is not None:
                failure = _check_plans(case, lazy, expected, epoch)
            if failure is not None:
                return failure
    except ProgramError as exc:
        return Failure("refused", epoch, f"ProgramError (the program is valid):\n{exc}")
    except Exception as exc:  # a crash is a finding too: report it with the case
        detail = "".join(traceback.format_exception(exc, limit=-8))
        return Failure(type(exc).__name__, epoch, detail)
    return None


def _canonical(program: Program, engine: EngineLike, rel: str) -> Callable[[Iterable[tuple]], list[tuple]]:
    """Rows in the engine's attribute order -> rows in the program's."""
    attrs = program.attributes(rel)
    engine_attrs = tuple(engine.attributes(rel))
    assert sorted(engine_attrs) == sorted(attrs), f"attributes({rel}) = {engine_attrs}, want {attrs}"
    order = [engine_attrs.index(a) for a in attrs]
    return lambda rows: [tuple(row[i] for i in order) for row in rows]


def _check_reads(
    case: Case, engine: EngineLike, expected: dict[str, set[tuple]], epoch: int
) -> Failure | None:
    for rel in case.program.relations():
        diff = _diff(_canonical(case.program, engine, rel)(engine.read(rel)), expected[rel])
        if diff is not None:
            return Failure("mismatch", epoch, f"read({rel}) at epoch {epoch} (read at every epoch):\n{diff}")
    return None


def _check_plans(
    case: Case, engine: EngineLike, expected: dict[str, set[tuple]], epoch: int
) -> Failure | None:
    program = case.program
    for n, plan in enumerate(case.lookups):
        if plan.first_epoch > epoch:
            continue
        rel = plan.relation
        canonical = _canonical(program, engine, rel)
        since = f"reader built at epoch {plan.first_epoch}, on a second engine"
        if not plan.key:
            diff = _diff(canonical(engine.read(rel)), expected[rel])
            if diff is not None:
                return Failure("mismatch", epoch, f"read({rel}) at epoch {epoch} ({since}):\n{diff}")
            continue
        attrs = program.attributes(rel)
        cols = [attrs.index(a) for a in plan.key]
        present = sorted({tuple(row[c] for c in cols) for row in expected[rel]}, key=repr)
        space = list(itertools.product(*(_key_values(program, rel, a, expected[rel]) for a in plan.key)))
        pick = random.Random(f"{case.seed}/{epoch}/{n}")
        if len(space) > MAX_KEYS:  # every present key, and absent ones
            space = present + pick.sample(space, MAX_KEYS)
        elif epoch > plan.first_epoch:  # a key left unasked for some epochs must stay right
            space = [values for values in space if pick.random() < 0.7]
        for values in space:
            key = dict(zip(plan.key, values, strict=True))
            want = {row for row in expected[rel] if tuple(row[c] for c in cols) == values}
            diff = _diff(canonical(engine.lookup(rel, key)), want)
            if diff is not None:
                return Failure("mismatch", epoch, f"lookup({rel}, {key}) at epoch {epoch} ({since}):\n{diff}")
    return None


def describe(case: Case, failure: Failure) -> str:
    program = case.program
    store: Store = {s: set() for s in program.sources}
    lines = [f"seed {case.seed}: {failure.kind} at epoch {failure.epoch}", "--- program ---", program.pomo()]
    lines += ["--- clingo ---", program.clingo(), "--- batches ---"]
    for i, batch in enumerate(case.batches[: failure.epoch]):
        apply(store, batch, program.transient)
        lines.append(f"epoch {i + 1}: {batch_text(batch)}")
    if case.lookups:
        lines.append("--- second engine's readers: relation by key (() = read), from epoch ---")
        lines += [f"{p.relation} by {p.key} from epoch {p.first_epoch}" for p in case.lookups]
    lines += [f"--- store at epoch {failure.epoch} ---", repr({s: sorted(r) for s, r in store.items()})]
    lines += ["--- failure ---", failure.detail]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Minimizing a failing case


def _drop_empty(program: Program) -> Program:
    """Derived relations without rules are dropped (a relation without rules is unknown)."""
    heads = {r.head for r in program.rules}
    derived = {d: a for d, a in program.derived.items() if d in heads}
    levels = [[d for d in level if d in heads] for level in program.levels]
    return replace(program, derived=derived, levels=[level for level in levels if level])


def _without_relation(program: Program, relation: str) -> Program:
    """The program without `relation` and, transitively, every rule that mentions a dropped one."""
    gone = {relation}
    rules = program.rules
    while True:
        kept = [
            r
            for r in rules
            if r.head not in gone
            and not any(not isinstance(x, Cmp) and x.atom.relation in gone for x in r.body)
        ]
        heads = {r.head for r in kept}
        gone |= {d for d in program.derived if d not in heads}
        if len(kept) == len(rules):
            return _drop_empty(replace(program, rules=kept))
        rules = kept


def _candidates(case: Case, failure: Failure) -> Iterable[Case]:
    """Smaller cases, biggest cuts first."""
    p = case.program
    batches = case.batches[: failure.epoch]
    if len(batches) < len(case.batches):
        yield replace(case, batches=batches)
    for i in range(len(batches)):
        yield replace(case, batches=batches[:i] + batches[i + 1 :])
    for i in range(len(case.lookups)):
        yield replace(case, lookups=case.lookups[:i] + case.lookups[i + 1 :])
    for d in reversed(p.derived):
        yield replace(
            case, program=_without_relation(p, d), lookups=[x for x in case.lookups if x.relation != d]
        )
    for i in range(len(p.rules)):
        yield replace(case, program=_drop_empty(replace(p, rules=p.rules[:i] + p.rules[i + 1 :])))
    for i, rule in enumerate(p.rules):
        for j in range(len(rule.body)):
            smaller = replace(rule, body=rule.body[:j] + rule.body[j + 1 :])
            yield replace(case, program=replace(p, rules=[*p.rules[:i], smaller, *p.rules[i + 1 :]]))
    for i, batch in enumerate(batches):
        for s, ops in batch.items():
            for row in ops:
                fewer = {**batch, s: {r: op for r, op in ops.items() if r != row}}
                fewer = {k: v for k, v in fewer.items() if v}
                yield replace(case, batches=[*batches[:i], fewer, *batches[i + 1 :]])
    for i, rule in enumerate(p.rules):
        for j, lit in enumerate(rule.body):
            if isinstance(lit, Pos | Neg | Agg):
                for k in range(len(lit.atom.args)):
                    atom = replace(lit.atom, args=lit.atom.args[:k] + lit.atom.args[k + 1 :])
                    smaller = replace(
                        rule, body=(*rule.body[:j], replace(lit, atom=atom), *rule.body[j + 1 :])
                    )
                    yield replace(case, program=replace(p, rules=[*p.rules[:i], smaller, *p.rules[i + 1 :]]))
    used = {lit.atom.relation for r in p.rules for lit in r.body if not isinstance(lit, Cmp)}
    for s in p.sources:
        if s not in used and len(p.sources) > 1:
            sources = {k: v for k, v in p.sources.items() if k != s}
            trimmed = [{k: v for k, v in b.items() if k != s} for b in batches]
            lookups = [plan for plan in case.lookups if plan.relation != s]
            fewer_sources = replace(p, sources=sources, transient=p.transient - {s})
            yield replace(case, program=fewer_sources, batches=trimmed, lookups=lookups)


def _sane(case: Case) -> bool:
    """The by-construction invariants hold and the naive evaluator agrees with clingo at the end."""
    if not well_formed(case.program):
        return False
    try:
        return solve_epochs(case.program, case.batches) == evaluate_epochs(case.program, case.batches)
    except Exception:
        return False


def shrink(case: Case, failure: Failure, factory: EngineFactory, budget: float) -> tuple[Case, Failure]:
    """Greedy delta debugging: keep any smaller sane case that fails in the same way."""
    deadline = time.monotonic() + budget
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in _candidates(case, failure):
            if time.monotonic() >= deadline:
                break
            if not _sane(candidate):
                continue
            found = run(candidate, factory)
            if found is not None and found.kind == failure.kind:
                case, failure, progress = candidate, found, True
                break
    return case, failure


def check(case: Case, factory: EngineFactory = real_engine) -> None:
    failure = run(case, factory)
    if failure is None:
        return
    report = describe(case, failure)
    budget = min(SHRINK_CASE, _shrink_left[0])
    if budget > 0:
        started = time.monotonic()
        small, small_failure = shrink(case, failure, factory, budget)
        _shrink_left[0] -= time.monotonic() - started
        report += "\n\n======== minimized ========\n" + describe(small, small_failure)
    pytest.fail(report, pytrace=False)


# ---------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("seed", range(200))
def test_engine_matches_clingo(seed: int) -> None:
    check(case_for_seed(seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100_000, 100_000 + SWEEP))
def test_engine_matches_clingo_sweep(seed: int) -> None:
    check(case_for_seed(seed))


@pytest.mark.parametrize("seed", range(120))
def test_engine_with_sliced_sources_matches_clingo(seed: int) -> None:
    """The plain family again, with the sources that recursive views' demanded rules read
    by bound attributes fetched by demand through slices (the lazy engine's keyed lookups)."""
    check(case_for_seed(seed), sliced_engine)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100_000, 100_000 + SWEEP))
def test_engine_with_sliced_sources_matches_clingo_sweep(seed: int) -> None:
    check(case_for_seed(seed), sliced_engine)


@pytest.mark.parametrize("seed", range(60))
def test_engine_matches_clingo_over_time(seed: int) -> None:
    """With a transient source and inductive (@next) rules: clingo runs one epoch at a time."""
    check(case_for_seed(20_000 + seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(120_000, 120_000 + SWEEP // 2))
def test_engine_matches_clingo_over_time_sweep(seed: int) -> None:
    check(case_for_seed(seed))


@pytest.mark.parametrize("seed", range(40))
def test_engine_matches_clingo_with_cids(seed: int) -> None:
    """With content ids (half the cases with time too). clingo's CID of a tuple of rel is the
    term k_rel(values), mapped to text through planner/cid.py: which tuple a CID names is checked
    independently, its encoding is not."""
    check(case_for_seed(40_000 + seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(140_000, 140_000 + SWEEP // 2))
def test_engine_matches_clingo_with_cids_sweep(seed: int) -> None:
    check(case_for_seed(seed))


@pytest.mark.parametrize("seed", range(12))
def test_negative_cycles_are_refused(seed: int) -> None:
    valid, invalid, cycle = generate_negative_cycle(random.Random(seed))
    real_engine(valid.pomo(), "valid.pomo")  # the program without the cycle is accepted
    with pytest.raises(ProgramError) as info:
        real_engine(invalid.pomo(), "invalid.pomo")
    message = str(info.value)
    assert all(name in message for name in cycle), f"the error should name {cycle}:\n{message}"


@pytest.mark.parametrize("seed", range(60))
def test_translation_matches_naive_evaluator(seed: int) -> None:
    """clingo (through the translation) and a naive evaluator agree: checks the oracle itself."""
    case = make_case(seed + 5000, epochs=6, temporal=seed % 2 == 1)
    want, got = solve_epochs(case.program, case.batches), evaluate_epochs(case.program, case.batches)
    for epoch, (w, g) in enumerate(zip(want, got, strict=True)):
        assert w == g, f"seed {seed + 5000} epoch {epoch}\n{case.program.pomo()}\n{case.program.clingo()}"


class NaiveEngine:
    """A reference implementation of the Engine API on the naive evaluator (from scratch each read)."""

    def __init__(self, program: Program, *, forget_deletes: bool = False) -> None:
        self.program = program
        self.store: Store = {s: set() for s in program.sources}
        self.epoch = 0
        self.forget_deletes = forget_deletes
        self.cache: dict[str, set[tuple]] | None = None

    def attributes(self, relation: str) -> tuple[str, ...]:
        return tuple(reversed(self.program.attributes(relation)))  # any order will do

    def write(
        self,
        insert: Mapping[str, Iterable[Mapping[str, object]]] = {},  # noqa: B006 (the contract's API)
        delete: Mapping[str, Iterable[Mapping[str, object]]] = {},  # noqa: B006
    ) -> int:
        for s, rows in insert.items():
            self.store[s] |= {tuple(r[a] for a in self.program.attributes(s)) for r in rows}
        if not self.forget_deletes:
            for s, rows in delete.items():
                self.store[s] -= {tuple(r[a] for a in self.program.attributes(s)) for r in rows}
        self.epoch += 1
        self.cache = None
        return self.epoch

    def read(self, relation: str) -> set[tuple]:
        if self.cache is None:
            self.cache = evaluate(self.program, self.store)
        return {tuple(reversed(row)) for row in self.cache[relation]}

    def lookup(self, relation: str, key: Mapping[str, object]) -> set[tuple]:
        attrs = self.attributes(relation)
        return {row for row in self.read(relation) if all(row[attrs.index(a)] == v for a, v in key.items())}


@pytest.mark.parametrize("seed", range(10))
def test_harness_passes_a_reference_engine_and_catches_a_broken_one(seed: int) -> None:
    case = make_case(seed, epochs=6)
    assert run(case, lambda text, name: NaiveEngine(case.program)) is None
    broken = run(case, lambda text, name: NaiveEngine(case.program, forget_deletes=True))
    store: Store = {s: set() for s in case.program.sources}
    effective_delete = False  # a delete of a present row: read(source) must show it
    for batch in case.batches:
        effective_delete |= any(
            op < 0 and row in store[s] for s, ops in batch.items() for row, op in ops.items()
        )
        apply(store, batch)
    assert (broken is not None) == effective_delete, broken
    assert broken is None or broken.kind == "mismatch"


def test_generator_covers_the_language() -> None:
    """The generated programs do use every feature the oracle is meant to cover."""
    seen: set[str] = set()
    for seed in range(400):
        program = make_case(seed, epochs=1, temporal=seed >= 200, cids=seed >= 300).program
        for rule in program.rules:
            lits = rule.body
            for n, lit in enumerate(lits):
                if isinstance(lit, Pos) and lit.cid:
                    earlier = {v for x in lits[:n] if isinstance(x, Pos) for v in x.variables()}
                    seen.add(
                        "cid-select" if lit.cid in earlier or lit.cid in lit.atom.variables() else "cid-bind"
                    )
            if any(
                isinstance(lit, Cmp) and isinstance(lit.lhs, Var) and var_type(lit.lhs.name) == "cid"
                for lit in lits
            ):
                seen.add("cid-compare")
            if any(t == "cid" for _, t in program.derived.get(rule.head, ())):
                seen.add("cid-attribute")
            if rule.inductive:
                carried = any(isinstance(x, Pos) and x.atom.relation == rule.head for x in lits)
                seen.add("@next-carry" if carried else "@next-event")
                if any(isinstance(x, Neg) for x in lits):
                    seen.add("@next-negation")
                if not any(not r.inductive for r in program.rules if r.head == rule.head):
                    seen.add("@next-only")
            seen |= {
                lit.function + ("-grouped" if _grouped(rule, lit) else "")
                for lit in lits
                if isinstance(lit, Agg)
            }
            seen |= {
                "neg-source" if lit.atom.relation in program.sources else "neg-derived"
                for lit in lits
                if isinstance(lit, Neg)
            }
            seen |= {"cmp" + lit.op for lit in lits if isinstance(lit, Cmp)}
            if sum(isinstance(lit, Pos) for lit in lits) >= 2:
                seen.add("join")
            if not lits:
                seen.add("fact")
            positives = [v for lit in lits if isinstance(lit, Pos) for v in lit.atom.variables()]
            if len(positives) > len(set(positives)):
                seen.add("repeated-variable")
            if any(not isinstance(t, Var) for lit in lits if isinstance(lit, Pos) for _, t in lit.atom.args):
                seen.add("constant")
            if any(isinstance(t, str) for lit in lits if isinstance(lit, Pos) for _, t in lit.atom.args):
                seen.add("string-constant")
            results = {lit.result for lit in lits if isinstance(lit, Agg)}
            if any(isinstance(lit, Agg) and lit.result.startswith("S") for lit in lits):
                seen.add("min/max-string")
            if any(isinstance(lit, Neg) and set(lit.atom.variables()) & results for lit in lits):
                seen.add("neg-on-result")
            if any(isinstance(lit, Agg) and set(lit.atom.variables()) & results for lit in lits):
                seen.add("grouped-by-result")
        for level in program.levels:
            if any(r.head in level and _uses(r, level) for r in program.rules):
                seen.add(f"recursion-{len(level)}")
        if any(sum(r.head == d for r in program.rules) > 1 for d in program.derived):
            seen.add("union")
    functions = {f + g for f in ("count", "sum", "min", "max") for g in ("", "-grouped")}
    wanted = functions | {"cmp" + op for op in ("==", "!=", "<", "<=", ">", ">=")}
    wanted |= {"neg-source", "neg-derived", "join", "fact", "repeated-variable", "constant"}
    wanted |= {"string-constant", "recursion-1", "recursion-2", "recursion-3", "union", "min/max-string"}
    wanted |= {"neg-on-result", "grouped-by-result"}
    wanted |= {"@next-carry", "@next-event", "@next-negation", "@next-only"}
    wanted |= {"cid-bind", "cid-select", "cid-compare", "cid-attribute"}
    assert seen >= wanted, wanted - seen


def _grouped(rule: Rule, agg: Agg) -> bool:
    return bool(set(agg.atom.variables()) & rule.outer_variables())


def _uses(rule: Rule, level: list[str]) -> bool:
    return any(isinstance(lit, Pos) and lit.atom.relation in level for lit in rule.body)


if __name__ == "__main__":
    # Minimize one case by hand: test_engine_oracle.py SEED [EPOCHS] (by default as in the tests).
    seed = int(sys.argv[1])
    case = case_for_seed(seed, int(sys.argv[2]) if len(sys.argv) > 2 else None)
    failure = run(case)
    if failure is None:
        print(f"seed {seed} passes")
    else:
        print(describe(case, failure))
        small, small_failure = shrink(case, failure, real_engine, 600)
        print("\n======== minimized ========\n" + describe(small, small_failure))
