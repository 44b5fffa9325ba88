"""The demand transformation (planner/demand/magic.py) against the program unchanged.

For a view read by a key, the rewritten program with a set of demanded keys must give, for
each demanded key, exactly the rows the original program gives, and never a row the
original lacks; the demanded copy must hold no more than the keys' closures where the
shape allows it (left-linear closure). The rewritten programs run in the in-process engine,
incrementally, while the base relations and the demanded keys change; the original's
rows come from the naive evaluator of random_programs.py (itself checked against clingo),
or from the engine over the original text for the named shapes.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable

import pytest

from pomoview.engine.engine import Engine
from pomoview.planner.compile import compile_program
from pomoview.planner.demand import text
from pomoview.planner.demand.extend import extend, parsed_extension
from pomoview.planner.demand.magic import Demanded, Full, demand_program
from pomoview.planner.frontend.parse import parse

from .random_programs import apply, evaluate, generate, random_batch

TC_LEFT = """
source edge(x: int, y: int).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), edge(x: Y, y: Z).
"""
TC_RIGHT = """
source edge(x: int, y: int).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- edge(x: X, y: Y), reach(x: Y, y: Z).
"""
TC_NONLINEAR = """
source edge(x: int, y: int).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), reach(x: Y, y: Z).
"""
SAME_GENERATION = """
source parent(child: int, parent: int).
source person(id: int).
sg(a: X, b: X) :- person(id: X).
sg(a: X, b: Y) :- parent(child: X, parent: P), sg(a: P, b: Q), parent(child: Y, parent: Q).
"""
MUTUAL = """
source edge(x: int, y: int).
odd(x: X, y: Y) :- edge(x: X, y: Y).
odd(x: X, y: Z) :- even(x: X, y: Y), edge(x: Y, y: Z).
even(x: X, y: Z) :- odd(x: X, y: Y), edge(x: Y, y: Z).
"""
CONSTANTS = """
source edge(x: int, y: int, color: string).
red(x: X, y: Y) :- edge(x: X, y: Y, color: "red").
red(x: X, y: Z) :- red(x: X, y: Y), edge(x: Y, y: Z, color: "red").
from_zero(y: Y, x: X) :- red(x: 0, y: Y), edge(x: X, y: Y, color: "blue").
"""
# Negation and an aggregate above the recursion: read whole, below the demanded rules.
ABOVE = """
source edge(x: int, y: int).
source blocked(x: int).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), edge(x: Y, y: Z).
open_reach(x: X, y: Y) :- reach(x: X, y: Y), !blocked(x: Y).
fanout(x: X, n: N) :- edge(x: X, y: Y), N := count : reach(x: X).
"""


def graph_rows(rng: random.Random, nodes: int, edges: int) -> list[dict[str, object]]:
    return [{"x": rng.randrange(nodes), "y": rng.randrange(nodes)} for _ in range(edges)]


def check(
    program: str,
    view: str,
    key: tuple[str, ...],
    sources: dict[str, list[dict[str, object]]],
    seeds: Iterable[tuple[object, ...]],
) -> tuple[Demanded, Engine, Engine]:
    """Runs the original and the rewritten program over `sources`, demands `seeds`, and
    checks the demanded rows; returns both engines."""
    demanded = demand_program(compile_program(program).checked, view, key)
    assert isinstance(demanded, Demanded), demanded
    original = Engine(program, partial=False)
    rewritten = Engine(demanded.text, partial=False)
    original.write(insert=sources)
    seeds = list(seeds)
    rewritten.write(
        insert={**sources, demanded.demand: [dict(zip(demanded.key, s, strict=True)) for s in seeds]}
    )
    compare(original, rewritten, demanded, set(seeds))
    return demanded, original, rewritten


def compare(original: Engine, rewritten: Engine, demanded: Demanded, seeds: set[tuple[object, ...]]) -> None:
    view = demanded.relation.rsplit("__", 1)[0]
    attrs = original.attributes(view)
    cols = [attrs.index(a) for a in demanded.key]
    order = [rewritten.attributes(demanded.relation).index(a) for a in attrs]
    want = original.read(view)
    got = {tuple(row[i] for i in order) for row in rewritten.read(demanded.relation)}
    assert got <= want, sorted(got - want)[:5]  # no row the original lacks
    assert {r for r in got if tuple(r[c] for c in cols) in seeds} == {
        r for r in want if tuple(r[c] for c in cols) in seeds
    }


@pytest.mark.parametrize(
    ("program", "view", "key"),
    [
        (TC_LEFT, "reach", ("x",)),
        (TC_LEFT, "reach", ("y",)),
        (TC_RIGHT, "reach", ("x",)),
        (TC_NONLINEAR, "reach", ("x",)),
        (TC_NONLINEAR, "reach", ("y",)),
        (MUTUAL, "even", ("x",)),
        (MUTUAL, "odd", ("x", "y")),
    ],
)
def test_closures_answer_the_demanded_keys_as_the_original(
    program: str, view: str, key: tuple[str, ...]
) -> None:
    rng = random.Random(3)
    for _ in range(5):
        edges = graph_rows(rng, 30, 45)
        seeds = {(rng.randrange(30),) * len(key) for _ in range(3)} | {(99,) * len(key)}  # 99: no edge
        check(program, view, key, {"edge": edges}, seeds)


def test_left_linear_closure_holds_only_the_demanded_closures() -> None:
    rng = random.Random(5)
    edges = graph_rows(rng, 200, 300)
    demanded, original, rewritten = check(TC_LEFT, "reach", ("x",), {"edge": edges}, [(1,), (2,)])
    closures = {r for r in original.read("reach") if r[0] in (1, 2)}
    assert len(rewritten.read(demanded.relation)) == len(closures)
    assert len(closures) < len(original.read("reach"))  # the graph's other closures are left out


def test_same_generation_and_constants() -> None:
    rng = random.Random(9)
    parents = [{"child": c, "parent": rng.randrange(c)} for c in range(1, 40)]
    people = [{"id": i} for i in range(40)]
    check(SAME_GENERATION, "sg", ("a",), {"parent": parents, "person": people}, [(5,), (17,), (39,)])
    colored = [{**e, "color": rng.choice(("red", "blue"))} for e in graph_rows(rng, 20, 60)]
    check(CONSTANTS, "from_zero", ("y",), {"edge": colored}, [(y,) for y in range(20)])
    check(CONSTANTS, "red", ("x",), {"edge": colored}, [(0,), (3,)])


def test_negation_and_aggregates_read_whole_relations_below() -> None:
    rng = random.Random(13)
    sources = {"edge": graph_rows(rng, 25, 40), "blocked": [{"x": rng.randrange(25)} for _ in range(5)]}
    demanded, _, _ = check(ABOVE, "open_reach", ("x",), sources, [(1,), (4,)])
    assert "blocked" not in " ".join(demanded.adorned)
    demanded, _, _ = check(ABOVE, "fanout", ("x",), sources, [(1,), (4,), (7,)])
    # The counted relation is read whole: its copy would depend on the count's demand.
    assert demanded.adorned == ("fanout__bf",)


def test_demand_and_writes_change_incrementally() -> None:
    """Demanded keys come and go (lookups and evictions) while edges are inserted and
    deleted (cycles made and broken): after every batch the demanded rows equal the
    original's."""
    rng = random.Random(17)
    demanded = demand_program(compile_program(TC_NONLINEAR).checked, "reach", ("x",))
    assert isinstance(demanded, Demanded)
    original = Engine(TC_NONLINEAR, partial=False)
    rewritten = Engine(demanded.text, partial=False)
    edges: set[tuple[int, int]] = set()
    seeds: set[tuple[object, ...]] = set()
    for _ in range(40):
        added = {(rng.randrange(12), rng.randrange(12)) for _ in range(rng.randrange(4))} - edges
        gone = set(rng.sample(sorted(edges), min(len(edges), rng.randrange(3))))
        asked = {(rng.randrange(12),) for _ in range(rng.randrange(2))} - seeds
        evicted = set(rng.sample(sorted(seeds), min(len(seeds), rng.randrange(2))))
        rows = ({"edge": [{"x": x, "y": y} for x, y in added]}, {"edge": [{"x": x, "y": y} for x, y in gone]})
        original.write(insert=rows[0], delete=rows[1])
        rewritten.write(
            insert={**rows[0], demanded.demand: [{"x": s[0]} for s in asked]},
            delete={**rows[1], demanded.demand: [{"x": s[0]} for s in evicted]},
        )
        edges = (edges | added) - gone
        seeds = (seeds | asked) - evicted
        compare(original, rewritten, demanded, seeds)


def test_the_cases_that_stay_full_say_why() -> None:
    checked = compile_program(TC_LEFT).checked
    assert demand_program(checked, "reach", ()) == Full(
        "'reach' is read whole (no key attribute), so every row is demanded"
    )
    timed = compile_program(
        "transient source e(x: int).\nc(x: X) @next :- e(x: X).\nc(x: X) @next :- c(x: X).\n"
        "v(x: X) :- c(x: X).\n"
    ).checked
    full = demand_program(timed, "v", ("x",))
    assert isinstance(full, Full) and "inductive" in full.reason


def test_a_key_an_aggregate_computes_is_guarded_after_it() -> None:
    counted = "source s(g: int, x: int).\nv(g: G, n: N) :- s(g: G), N := count : s(g: G).\n"
    demanded, _, _ = check(
        counted,
        "v",
        ("n",),
        {"s": [{"g": g, "x": x} for g in range(5) for x in range(g)]},
        [(2,), (3,), (9,)],
    )
    assert "v__fb(g: G, n: N) :- s(g: G), N := count : s(g: G), m__v__fb(n: N)." in demanded.text


def test_random_programs_answer_the_demanded_keys_as_the_original() -> None:
    """Random stratified programs (random_programs.py: joins, constants, comparisons,
    negation, aggregates, recursion and mutual recursion), a random derived relation read by
    random key attributes, random batches and random demand."""
    assert random_cases(23, 200) >= 180


@pytest.mark.slow
def test_random_programs_sweep() -> None:
    """The same, by hand: POMOVIEW_MAGIC_SWEEP cases (default 3,000)."""
    cases = int(os.environ.get("POMOVIEW_MAGIC_SWEEP", "3000"))
    assert random_cases(29, cases) >= cases * 9 // 10


def random_cases(seed: int, cases: int) -> int:
    """Runs `cases` random cases; returns how many the pass rewrote (the others are Full)."""
    rng = random.Random(seed)
    rewritten_cases = 0
    for case in range(cases):
        program = generate(rng)
        checked = compile_program(program.pomo()).checked
        view = rng.choice(list(program.derived))
        attributes = program.attributes(view)
        if not attributes:
            continue  # a relation of no attributes has no key to demand
        key = tuple(a for a in attributes if rng.random() < 0.5) or (attributes[0],)
        demanded = demand_program(checked, view, key)
        if isinstance(demanded, Full):
            continue
        rewritten_cases += 1
        engine = Engine(demanded.text, partial=False)
        store: dict[str, set[tuple]] = {s: set() for s in program.sources}
        cols = [attributes.index(a) for a in demanded.key]
        order = [engine.attributes(demanded.relation).index(a) for a in attributes]
        seeds: set[tuple[object, ...]] = set()
        for _ in range(4):
            batch = random_batch(rng, program, store)
            apply(store, batch)
            want_all = evaluate(program, store)[view]
            asked = {tuple(rng.choice(sorted(want_all))[c] for c in cols)} if want_all else set()
            asked |= {tuple(rng.choice((0, 1, 2, "a")) for _ in cols)}
            inserts = {
                s: [dict(zip(program.attributes(s), row, strict=True)) for row, op in ops.items() if op > 0]
                for s, ops in batch.items()
            }
            deletes = {
                s: [dict(zip(program.attributes(s), row, strict=True)) for row, op in ops.items() if op < 0]
                for s, ops in batch.items()
            }
            fresh = [s for s in asked - seeds if _typed(s, demanded.key, checked.relations[view].types)]
            inserts[demanded.demand] = [dict(zip(demanded.key, s, strict=True)) for s in fresh]
            seeds |= set(fresh)
            engine.write(insert=inserts, delete=deletes)
            got = {tuple(row[i] for i in order) for row in engine.read(demanded.relation)}
            assert got <= want_all, (case, program.pomo(), demanded.text)
            assert {r for r in got if tuple(r[c] for c in cols) in seeds} == {
                r for r in want_all if tuple(r[c] for c in cols) in seeds
            }, (case, program.pomo(), demanded.text)
    return rewritten_cases


def _typed(seed: tuple[object, ...], key: tuple[str, ...], types: dict[str, str]) -> bool:
    return all((types[a] == "string") == isinstance(v, str) for a, v in zip(key, seed, strict=True))


def test_printed_rules_parse_back_to_the_same_rules() -> None:
    for program in (TC_LEFT, SAME_GENERATION, CONSTANTS, ABOVE):
        parsed = parse(program)
        again = parse("\n".join(text.rule(r) for r in parsed.rules))
        assert [text.rule(r) for r in again.rules] == [text.rule(r) for r in parsed.rules]


def test_a_key_of_no_single_type_stays_full() -> None:
    # f and g derive nothing, so their attribute's type is inferred as `any`: a demand
    # source could not declare it.
    program = """
    source s(x: int).
    f(x: X) :- g(x: X).
    g(x: X) :- f(x: X).
    i(x: X) :- f(x: X).
    """
    rewritten = demand_program(compile_program(program).checked, "i", ("x",))
    assert isinstance(rewritten, Full) and "no single type" in rewritten.reason


def test_an_extension_is_parsed_as_its_whole_text_is() -> None:
    """`parsed_extension` splices the base program's kept parse with the new part's: the
    same program, positions included, as parsing the extended text whole; a second and a
    third extension over the first (the server's readers, one after another) too."""
    rng = random.Random(41)
    spliced = 0
    for _ in range(60):
        program = generate(rng)
        checked = compile_program(program.pomo()).checked
        for _ in range(3):
            view = rng.choice(list(program.derived))
            attributes = program.attributes(view)
            if not attributes:
                break
            demanded = demand_program(checked, view, (rng.choice(attributes),))
            if isinstance(demanded, Full):
                break
            assert parsed_extension(checked.text, demanded.text) == parse(demanded.text, "<demand>")
            spliced += 1
            found = extend(checked, view, demanded.key)
            assert not isinstance(found, Full)
            checked = found.checked
    assert spliced >= 60
