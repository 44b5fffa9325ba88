"""The planner + dataflow against clingo, on random programs and random writes.

Each case generates a random program in the supported subset (2-3 sources of
two int attributes over 0..4; 1-4 derived relations with joins, repeated
variables, constants, constraints, count/sum/min/max aggregates, unions of
rules, facts, and derived relations used by later ones), random insert/delete
batches over several epochs, and readers for every derived relation by random
key attributes (the empty key = the full relation; single attributes, pairs),
each built at a random epoch and stepped from then on. After every epoch each
reader's lookups are compared with clingo's answer computed from scratch over
the current base relations.

A second test compares partial readers with a full reader (key ()) of the same
relation over the same writes: the "fully materialized run" oracle.
"""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass, field

import clingo
import pytest

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram, compile_program

DOMAIN = range(5)
# The slow sweeps' sizes; raise them by hand for a long bug hunt, e.g.
# POMOVIEW_ORACLE_SWEEP=5000 pytest -m slow tests/planner/test_oracle_clingo.py
SWEEP = int(os.environ.get("POMOVIEW_ORACLE_SWEEP", "400"))
VARS = ("A", "B", "C", "D")
OPS = ("==", "!=", "<", "<=", ">", ">=")
CLINGO_OP = {"==": "="}


@dataclass
class Atom:
    relation: str
    args: list[tuple[str, object]]  # (attribute, variable name | int)

    def text(self) -> str:
        return f"{self.relation}({', '.join(f'{a}: {t}' for a, t in self.args)})"


@dataclass
class Agg:
    result: str
    function: str
    value: str | None
    atom: Atom


@dataclass
class Rule:
    head: str
    head_args: list[tuple[str, object]]
    atoms: list[Atom] = field(default_factory=list)
    constraints: list[tuple[object, str, object]] = field(default_factory=list)
    aggs: list[Agg] = field(default_factory=list)
    late_constraints: list[tuple[object, str, object]] = field(default_factory=list)


@dataclass
class Program:
    sources: dict[str, list[str]]
    derived: dict[str, list[str]]
    rules: list[Rule]

    def pomo(self) -> str:
        lines = [f"source {s}({', '.join(f'{a}: int' for a in attrs)})." for s, attrs in self.sources.items()]
        for rule in self.rules:
            head = f"{rule.head}({', '.join(f'{a}: {t}' for a, t in rule.head_args)})"
            body: list[str] = [a.text() for a in rule.atoms]
            body += [f"{lhs} {op} {rhs}" for lhs, op, rhs in rule.constraints]
            for agg in rule.aggs:
                value = f" {agg.value}" if agg.value else ""
                body.append(f"{agg.result} := {agg.function}{value} : {agg.atom.text()}")
            body += [f"{lhs} {op} {rhs}" for lhs, op, rhs in rule.late_constraints]
            lines.append(f"{head} :- {', '.join(body)}." if body else f"{head}.")
        for name in self.derived:
            lines.append(f"view {name}().")
        return "\n".join(lines) + "\n"

    def attributes(self, relation: str) -> list[str]:
        return self.sources.get(relation) or self.derived[relation]

    def clingo(self) -> str:
        """Positional predicates, attributes in declaration order (the first head's for derived)."""
        lines: list[str] = []
        fresh = itertools.count()

        def positional(atom: Atom, missing: str) -> list[str]:
            by_attr = dict(atom.args)
            out = []
            for attr in self.attributes(atom.relation):
                if attr in by_attr:
                    out.append(str(by_attr[attr]))
                else:
                    out.append("_" if missing == "_" else f"W{next(fresh)}")
            return out

        for rule in self.rules:
            by_attr = dict(rule.head_args)
            head = f"{rule.head}({', '.join(str(by_attr[a]) for a in self.attributes(rule.head))})"
            body = [f"{a.relation}({', '.join(positional(a, '_'))})" for a in rule.atoms]
            body += [f"{lhs} {CLINGO_OP.get(op, op)} {rhs}" for lhs, op, rhs in rule.constraints]
            outer = {t for a in rule.atoms for _, t in a.args if isinstance(t, str)}
            outer |= {agg.result for agg in rule.aggs}  # bound by their assignment: global
            for k, agg in enumerate(rule.aggs):
                # local variables get names of their own, so two aggregates never share one
                atom = Atom(
                    agg.atom.relation,
                    [
                        (a, t if not isinstance(t, str) or t in outer else f"{t}_{k}")
                        for a, t in agg.atom.args
                    ],
                )
                terms = positional(atom, "W")
                cond = f"{atom.relation}({', '.join(terms)})"
                element = ", ".join(([f"{agg.value}_{k}"] if agg.value else []) + (terms or ["0"]))
                body.append(f"{agg.result} = #{agg.function}{{ {element} : {cond} }}")
                if agg.function == "min":
                    body.append(f"{agg.result} < #sup")  # clingo: min of {} is #sup
                if agg.function == "max":
                    body.append(f"{agg.result} > #inf")
            body += [f"{lhs} {CLINGO_OP.get(op, op)} {rhs}" for lhs, op, rhs in rule.late_constraints]
            lines.append(f"{head} :- {', '.join(body)}." if body else f"{head}.")
        return "\n".join(lines) + "\n"


def generate(rng: random.Random) -> Program:
    sources = {f"s{i}": ["x", "y"] for i in range(rng.randint(2, 3))}
    derived: dict[str, list[str]] = {}
    rules: list[Rule] = []
    for d in range(rng.randint(1, 4)):
        name = f"d{d}"
        attrs = [f"h{i}" for i in range(rng.randint(1, 3))]
        usable = list(sources) + list(derived)  # earlier derived relations only: no recursion
        derived[name] = attrs
        for r in range(rng.choice((1, 1, 2))):
            head_order = attrs if r == 0 else rng.sample(attrs, len(attrs))
            rules.append(_rule(rng, name, head_order, usable, sources, derived))
    return Program(sources, derived, rules)


def _term(rng: random.Random, pool: list[str], p_var: float) -> object:
    return rng.choice(pool) if pool and rng.random() < p_var else rng.choice(DOMAIN)


def _atom(rng: random.Random, relation: str, attrs: list[str], pool: list[str]) -> Atom:
    chosen = rng.sample(attrs, rng.randint(1, len(attrs))) if rng.random() < 0.95 else []
    return Atom(relation, [(a, _term(rng, pool, 0.8)) for a in chosen])


def _rule(
    rng: random.Random, name: str, head_attrs: list[str], usable: list[str], sources: dict, derived: dict
) -> Rule:
    def attrs_of(rel: str) -> list[str]:
        return sources.get(rel) or derived[rel]

    rule = Rule(name, [])
    n_atoms = rng.choice((0, 1, 1, 1, 2, 2, 2, 3))
    for _ in range(n_atoms):
        rel = rng.choice(usable)
        rule.atoms.append(_atom(rng, rel, attrs_of(rel), list(VARS)))
    bound = sorted({t for a in rule.atoms for _, t in a.args if isinstance(t, str)})
    for _ in range(rng.choice((0, 0, 1, 2))):
        if bound:
            rule.constraints.append((rng.choice(bound), rng.choice(OPS), _term(rng, bound, 0.4)))
    results: list[str] = []
    for k in range(rng.choice((0, 0, 1, 1, 2))):
        function = rng.choice(("count", "sum", "min", "max"))
        rel = rng.choice(usable)
        attrs = attrs_of(rel)
        chosen = rng.sample(attrs, rng.randint(1, len(attrs)))
        value = None
        args: list[tuple[str, object]] = []
        for i, attr in enumerate(chosen):
            if function != "count" and i == 0:
                value = "V"
                args.append((attr, value))
                continue
            roll = rng.random()
            if roll < 0.5 and (bound or results):
                # a grouping variable; an earlier aggregate's result groups too (as in clingo)
                args.append((attr, rng.choice(bound + results)))
            elif roll < 0.85:
                args.append((attr, rng.choice(("L", "M"))))  # local (maybe repeated)
            else:
                args.append((attr, rng.choice(DOMAIN)))
        result = f"N{k}"
        rule.aggs.append(Agg(result, function, value, Atom(rel, args)))
        results.append(result)
        if rng.random() < 0.3:
            rule.late_constraints.append((result, rng.choice(OPS), rng.choice((0, 1, 2, 3, 6))))
    head_pool = bound + results
    rule.head_args = [(a, _term(rng, head_pool, 0.85)) for a in head_attrs]
    return rule


def solve(program: Program, store: dict[str, set[tuple]]) -> dict[str, set[tuple]]:
    facts = "".join(f"{s}({a},{b}).\n" for s, rows in store.items() for a, b in rows)
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], facts + program.clingo())
    ctl.ground([("base", [])])
    models: list[list[clingo.Symbol]] = []
    ctl.solve(on_model=lambda m: models.append(list(m.symbols(shown=True))))
    assert len(models) == 1, "a stratified program has exactly one model"
    out: dict[str, set[tuple]] = {name: set() for name in program.derived}
    for sym in models[0]:
        if sym.name in out:
            assert all(a.type == clingo.SymbolType.Number for a in sym.arguments), sym
            out[sym.name].add(tuple(a.number for a in sym.arguments))
    return out


def make_fetch(store: dict[str, set[tuple]], program: Program):
    def fetch(
        source: str, names: tuple[str, ...], keys: list[tuple], filters: tuple = ()
    ) -> list[tuple]:
        cols = [program.sources[source].index(n) for n in names]
        tests = [(program.sources[source].index(a), v) for a, v in filters]
        wanted = set(keys)
        return [
            row
            for row in store[source]
            if tuple(row[c] for c in cols) in wanted and all(row[i] == v for i, v in tests)
        ]

    return fetch


def random_batch(rng: random.Random, sources: dict) -> dict[str, dict[tuple, int]]:
    batch: dict[str, dict[tuple, int]] = {}
    for s in sources:
        if rng.random() < 0.25:
            continue
        ops: dict[tuple, int] = {}
        for _ in range(rng.randint(1, 8)):
            ops[(rng.choice(DOMAIN), rng.choice(DOMAIN))] = rng.choice((1, 1, -1))
        batch[s] = ops
    return batch


def apply(store: dict[str, set[tuple]], batch: dict[str, dict[tuple, int]]) -> dict[str, ZSet]:
    for s, ops in batch.items():
        for row, op in ops.items():
            (store[s].add if op > 0 else store[s].discard)(row)
    return {s: ZSet(ops) for s, ops in batch.items()}


@dataclass
class ReaderPlan:
    relation: str
    key: tuple[str, ...]
    built_at: int
    eager: bool  # look up every key every epoch, or a random subset
    circuit: Circuit | None = None


def key_choices(rng: random.Random, attrs: list[str]) -> list[tuple[str, ...]]:
    options = [()] + [(a,) for a in attrs] + [tuple(p) for p in itertools.permutations(attrs, 2)]
    if len(attrs) > 2:
        options.append(tuple(rng.sample(attrs, len(attrs))))
    return rng.sample(options, min(len(options), 3))


def check_reader(
    plan: ReaderPlan, compiled: CompiledProgram, expected: set[tuple], rng: random.Random, context: str
) -> None:
    assert plan.circuit is not None
    attrs = compiled.relations[plan.relation].attributes
    cols = [attrs.index(a) for a in plan.key]
    values = sorted(set(DOMAIN) | {row[c] for row in expected for c in cols} | {-1, 99})
    space = list(itertools.product(values, repeat=len(cols)))
    keys = space if plan.eager else rng.sample(space, max(1, len(space) // 3))
    results = plan.circuit.lookup(keys)
    for key, rows in zip(keys, results, strict=True):
        want = {row for row in expected if tuple(row[c] for c in cols) == key}
        assert len(rows) == len(set(rows)), f"duplicates at {key}\n{context}"
        assert set(rows) == want, (
            f"{plan.relation} by {plan.key} at {key}: got {sorted(rows)}, want {sorted(want)}\n{context}"
        )


def run_case(seed: int, epochs: int = 5) -> None:
    rng = random.Random(seed)
    program = generate(rng)
    text = program.pomo()
    compiled = compile_program(text, f"case{seed}.pomo")
    store: dict[str, set[tuple]] = {s: set() for s in program.sources}
    fetch = make_fetch(store, program)
    plans = [
        ReaderPlan(rel, key, rng.randint(0, epochs - 1), rng.random() < 0.5)
        for rel in program.derived
        for key in key_choices(rng, program.derived[rel])
    ]
    context = f"seed {seed}\n--- program ---\n{text}--- clingo ---\n{program.clingo()}"
    for epoch in range(epochs):
        for plan in plans:
            if plan.built_at == epoch:
                plan.circuit = compiled.build_reader(plan.relation, plan.key, fetch)
        batch = random_batch(rng, program.sources)
        changes = apply(store, batch)
        for plan in plans:
            if plan.circuit is not None:
                plan.circuit.step(changes)
        expected = solve(program, store)
        ctx = f"{context}--- epoch {epoch}, store ---\n{store}\n"
        for plan in plans:
            if plan.circuit is not None:
                check_reader(plan, compiled, expected[plan.relation], rng, ctx)


@pytest.mark.parametrize("seed", range(100))
def test_random_programs_match_clingo(seed: int) -> None:
    run_case(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 100 + SWEEP))
def test_random_programs_match_clingo_sweep(seed: int) -> None:
    run_case(seed, epochs=7)


def run_against_full(seed: int, epochs: int = 6) -> None:
    """Partial readers vs a full reader (key ()) of the same relation, same writes."""
    rng = random.Random(seed)
    program = generate(rng)
    text = program.pomo()
    compiled = compile_program(text)
    store: dict[str, set[tuple]] = {s: set() for s in program.sources}
    fetch = make_fetch(store, program)
    for _ in range(2):
        apply(store, random_batch(rng, program.sources))
    readers: list[tuple[str, tuple[str, ...], Circuit, Circuit]] = []
    for rel, attrs in program.derived.items():
        full = compiled.build_reader(rel, (), fetch)
        for key in key_choices(rng, attrs):
            if key:
                readers.append((rel, key, compiled.build_reader(rel, key, fetch), full))
    asked: dict[int, set[tuple]] = {}
    for epoch in range(epochs):
        changes = apply(store, random_batch(rng, program.sources))
        stepped: set[int] = set()
        for _, _, partial, full in readers:
            for circuit in (partial, full):
                if id(circuit) not in stepped:
                    circuit.step(changes)
                    stepped.add(id(circuit))
        for i, (rel, key, partial, full) in enumerate(readers):
            attrs = compiled.relations[rel].attributes
            cols = [attrs.index(a) for a in key]
            everything = set(full.lookup([()])[0])
            fresh = {tuple(rng.choice(DOMAIN) for _ in cols) for _ in range(3)}
            asked.setdefault(i, set()).update(fresh)
            keys = sorted(asked[i])  # earlier keys again: their state was kept up to date
            for k, rows in zip(keys, partial.lookup(keys), strict=True):
                want = {row for row in everything if tuple(row[c] for c in cols) == k}
                assert set(rows) == want, f"seed {seed} epoch {epoch} {rel} by {key} at {k}\n{text}"


@pytest.mark.parametrize("seed", range(60))
def test_partial_readers_match_full_reader(seed: int) -> None:
    run_against_full(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60, 60 + SWEEP * 3 // 4))
def test_partial_readers_match_full_reader_sweep(seed: int) -> None:
    run_against_full(seed, epochs=8)


def test_generator_covers_the_subset() -> None:
    """The generated programs do use every feature the oracle is meant to cover."""
    seen: set[str] = set()
    for seed in range(100):
        program = generate(random.Random(seed))
        for rule in program.rules:
            seen |= {agg.function for agg in rule.aggs}
            if len(rule.atoms) >= 2:
                seen.add("join")
            if rule.constraints or rule.late_constraints:
                seen.add("constraint")
            results = {agg.result for agg in rule.aggs}
            if any(t in results for agg in rule.aggs for _, t in agg.atom.args):
                seen.add("result-groups")
            if any(a.relation in program.derived for a in rule.atoms):
                seen.add("derived-atom")
            if not rule.atoms and not rule.aggs:
                seen.add("fact")
            if any(not isinstance(t, str) for a in rule.atoms for _, t in a.args):
                seen.add("constant")
        if any(sum(r.head == d for r in program.rules) > 1 for d in program.derived):
            seen.add("union")
    assert seen >= {
        "count",
        "sum",
        "min",
        "max",
        "join",
        "constraint",
        "derived-atom",
        "fact",
        "constant",
        "union",
        "result-groups",
    }, seen
