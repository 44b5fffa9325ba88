"""Validation: each kind of error is a ProgramError at the exact line and column."""

from __future__ import annotations

import pytest

from pomoview.planner.compile import compile_program
from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import ProgramError
from pomoview.planner.frontend.parse import parse
from pomoview.planner.frontend.validate import CheckedProgram, validate

H = "source r(a: int, b: string).\nsource s(a: int, n: int).\n"  # lines 1-2

# name -> (program, line, column, words of the message)
ERRORS: dict[str, tuple[str, int, int, str]] = {
    "unknown relation": (H + "v(a: A) :- q(a: A).", 3, 12, "unknown relation 'q'"),
    "unknown relation in aggregate": (
        H + "v(a: A, n: N) :- r(a: A), N := count : q(a: A).",
        3,
        40,
        "unknown relation 'q'",
    ),
    "unknown attribute": (H + "v(a: A) :- r(a: A, c: C).", 3, 20, "no attribute 'c'"),
    "attribute twice in atom": (H + "v(a: A) :- r(a: A, a: A).", 3, 20, "appears twice"),
    "attribute twice in head": (H + "v(a: A, a: A) :- r(a: A).", 3, 9, "twice in the head"),
    "type clash between atoms": (
        H + "v(a: A) :- r(a: A), r(b: A).",
        3,
        26,
        "type clash: A is int elsewhere but string",
    ),
    "type clash with a constant": (H + "v(a: A) :- r(a: A, b: 3).", 3, 23, "type clash"),
    "type clash in a comparison": (
        H + 'v(a: A) :- r(a: A), A < "x".',
        3,
        21,
        "cannot compare int with string",
    ),
    "type clash across rules": (
        H + "v(a: A) :- r(a: A).\nv(a: B) :- r(b: B).",
        4,
        3,
        "v.a is int in another rule",
    ),
    "range restriction": (H + "v(a: A, c: C) :- r(a: A).", 3, 12, "C is not range restricted"),
    "range restriction (local aggregate variable)": (
        H + "v(a: A, u: U) :- r(a: A), N := count : s(a: A, n: U).",
        3,
        12,
        "U is not range restricted",
    ),
    "constraint not grounded": (H + "v(a: A) :- r(a: A), C > 1.", 3, 21, "C is never grounded"),
    "constraint on a local aggregate variable": (
        H + "v(a: A) :- r(a: A), N := count : s(a: A, n: U), U > 1.",
        3,
        49,
        "U is never grounded, so this constraint",
    ),
    "aggregated variable bound outside": (
        H + "v(a: A, t: T) :- s(a: A, n: V), T := sum V : s(a: A, n: V).",
        3,
        42,
        "V is aggregated, so it must not be bound outside",
    ),
    "aggregated variable appears twice": (
        H + "v(a: A, t: T) :- r(a: A), T := sum V : s(a: V, n: V).",
        3,
        36,
        "V must appear exactly once",
    ),
    "aggregated variable missing": (
        H + "v(a: A, t: T) :- r(a: A), T := max V : s(a: A).",
        3,
        36,
        "V must appear exactly once",
    ),
    "sum over a string": (
        H + "v(a: A, t: T) :- s(a: A), T := sum V : r(a: A, b: V).",
        3,
        36,
        "sum needs a number; V is string",
    ),
    "unknown aggregate": (
        H + "v(a: A, t: T) :- r(a: A), T := avg V : s(a: A, n: V).",
        3,
        27,
        "unknown aggregate 'avg'",
    ),
    "aggregate arity": (
        H + "v(a: A, t: T) :- r(a: A), T := count V : s(a: A, n: V).",
        3,
        27,
        "count takes 0",
    ),
    "view of unknown relation": (H + "view w().\nv(a: A) :- r(a: A).", 3, 1, "unknown relation 'w'"),
    "view of unknown attribute": (H + "view v(z).\nv(a: A) :- r(a: A).", 3, 1, "no attribute 'z'"),
    "view of a source": (H + "view r(a).", 3, 1, "'r' is a source"),
    "view declared twice": (H + "view v().\nview v(a).\nv(a: A) :- r(a: A).", 4, 1, "declared twice"),
    "order by an unknown attribute": (
        H + "view v(a) order by z.\nv(a: A, b: B) :- r(a: A, b: B).",
        3,
        20,
        "ordered by 'z', which 'v' has no rows of",
    ),
    "order by an attribute twice": (
        H + "view v(a) order by b, b desc.\nv(a: A, b: B) :- r(a: A, b: B).",
        3,
        23,
        "ordered by 'b' twice",
    ),
    "a limit of 0": (
        H + "view v(a) order by b limit 0.\nv(a: A, b: B) :- r(a: A, b: B).",
        3,
        28,
        "a limit is a positive int",
    ),
    "a negative limit": (
        H + "view v(a) order by b limit -2.\nv(a: A, b: B) :- r(a: A, b: B).",
        3,
        28,
        "a limit is a positive int",
    ),
    "a limit without an order": (
        H + "view v(a) limit 3.\nv(a: A, b: B) :- r(a: A, b: B).",
        3,
        17,
        "has a limit but no order",
    ),
    "head attributes differ across rules": (
        H + "v(a: A) :- r(a: A).\nv(b: B) :- r(b: B).",
        4,
        1,
        "has attributes (b) here but (a) at line 3",
    ),
    "rule deriving into a source": (
        H + "r(a: A, b: B) :- r(a: A, b: B).",
        3,
        1,
        "'r' is a source; rules cannot derive",
    ),
    "source declared twice": (H + "source r(x: int).", 3, 1, "declared twice"),
    "source attribute declared twice": ("source r(a: int, a: int).", 1, 21, "declared twice"),
    "unknown type": ("source r(a: integer).", 1, 13, "unknown type 'integer'"),
    "unstratifiable: negation through recursion": (
        H + "v(a: A) :- r(a: A), !w(a: A).\nw(a: A) :- v(a: A).",
        3,
        21,
        "cannot be stratified: the cycle v -> w -> v goes through this negation",
    ),
    "unstratifiable: negation of itself": (
        H + "v(a: A) :- r(a: A), !v(a: A).",
        3,
        21,
        "the cycle v -> v goes through this negation",
    ),
    "unstratifiable: aggregate through recursion": (
        H + "v(a: A, n: N) :- r(a: A), N := count : v(a: A).",
        3,
        27,
        "the cycle v -> v goes through this aggregate",
    ),
    "unstratifiable: longer cycle, negative edge in the middle": (
        H + "x(a: A) :- r(a: A), y(a: A).\ny(a: A) :- r(a: A), !z(a: A).\nz(a: A) :- x(a: A).",
        4,
        21,
        "the cycle y -> z -> x -> y goes through this negation (y depends negatively on z)",
    ),
    "@next without its head or an instantaneous atom": (
        H + "v(a: A)@next :- r(a: A).",
        3,
        1,
        "inductive rule could change 'v' forever",
    ),
    "@next reading a relation that persists": (
        "source r(a: int).\ntransient source t(a: int).\n"
        "e(a: A) :- t(a: A).\ne(a: A) :- r(a: A).\nv(a: A)@next :- e(a: A).",
        5,
        1,
        "inductive rule could change 'v' forever",
    ),
    "@next head in the body with other bindings": (
        H + "v(a: A, b: B)@next :- v(a: B, b: A).\nv(a: A, b: A) :- s(a: A).",
        3,
        1,
        "inductive rule could change 'v' forever",
    ),
    "@next into a source": (H + "r(a: A, b: B)@next :- r(a: A, b: B).", 3, 1, "'r' is a source"),
    "aggregate result inside its own atom": (
        H + "v(n: N) :- N := count : s(a: N).",
        3,
        12,
        "N is this aggregate's result, so it cannot appear in its own atom",
    ),
    "aggregates grouped by each other's results": (
        H + "v(m: M) :- M := count : s(a: N), N := count : s(a: M).",
        3,
        30,
        "N is the result of a later aggregate",
    ),
    "aggregated variable is an aggregate's result": (
        H + "v(m: M) :- N := count : r(), M := sum N : s(a: N).",
        3,
        39,
        "N is aggregated, so it must not be bound outside",
    ),
    "negation not grounded": (H + "v(a: A) :- r(a: A), !s(a: A, n: N).", 3, 33, "N is never grounded"),
    "negation not grounded by a local aggregate variable": (
        H + "v(a: A) :- r(a: A), N := count : s(a: A, n: U), !s(a: U).",
        3,
        55,
        "U is never grounded, so this negation",
    ),
    "unknown relation in a negation": (H + "v(a: A) :- r(a: A), !q(a: A).", 3, 22, "unknown relation 'q'"),
    "unknown attribute in a content id binding": (
        H + "v(a: A) :- r(a: A), C := s(z: A).",
        3,
        28,
        "'s' has no attribute 'z'",
    ),
    "type clash in a negation": (H + "v(a: A) :- r(a: A, b: B), !s(a: B).", 3, 33, "type clash: B is string"),
    "type clash: a content id is not an int": (
        H + "v(a: A) :- r(a: A), C := s(a: A), s(n: C).",
        3,
        40,
        "type clash: C is cid elsewhere but int here",
    ),
    "type clash: a recursive relation's inferred type": (
        H + "v(a: A) :- r(a: A).\nv(a: A) :- v(a: B), r(a: B, b: A).",
        4,
        3,
        "v.a is int in another rule, string here",
    ),
    "missing colon in an aggregate (the spec's own typo)": (
        H + "v(a: A, t: T) :- r(a: A), T := sum V s(a: A, n: V).",
        3,
        38,
        "missing ':' between the aggregate and its atom",
    ),
    "unknown type cid spelled wrong": ("source r(a: CID).", 1, 13, "unknown type 'CID'"),
    "content id inside its own recursive stratum": (
        "source s(c: cid).\np(c: C) :- s(c: C).\np(c: D) :- D := p(c: C).",
        3,
        12,
        "the content id of 'p' is taken inside its own recursive stratum (p)",
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_is_positioned(name: str) -> None:
    text, line, column, words = ERRORS[name]
    with pytest.raises(ProgramError) as info:
        compile_program(text, "prog.pomo")
    err = info.value
    assert len(err.diagnostics) == 1, err.render()  # no cascade of follow-up errors
    (d,) = err.diagnostics
    assert (d.position.line, d.position.column) == (line, column), err.render()
    assert words in d.message, err.render()
    assert not err.unsupported  # every feature of the language is supported
    rendered = err.render().splitlines()
    assert rendered[0] == f"prog.pomo:{line}:{column}: error: {d.message}"
    assert rendered[1] == "    " + text.splitlines()[line - 1]
    assert rendered[2] == "    " + " " * (column - 1) + "^"


def test_all_errors_of_a_program_are_reported_in_order() -> None:
    text = H + 'v(a: A) :- r(z: A), q(a: A).\nw(a: A) :- r(a: A), A == "s".\n'
    with pytest.raises(ProgramError) as info:
        compile_program(text, "many.pomo")
    positions = [(d.position.line, d.position.column) for d in info.value.diagnostics]
    assert positions == [(3, 14), (3, 21), (4, 21)], info.value.render()
    rendered = info.value.render()
    assert rendered.count("many.pomo:") == 3 and rendered.count("^") == 3


VALID = [
    H + "view v(a).\nv(a: A, b: B) :- r(a: A, b: B).",
    H + "v(a: A) :- r(a: A).\nv(a: A) :- s(a: A).",  # a union
    H + 'v(b: B, a: A) :- r(a: A, b: B).\nv(a: A, b: "k") :- s(a: A).',  # other attribute order
    H + 'v(a: 1, b: "x").',  # a fact
    H + "v(a: A, n: N) :- r(a: A), N := count : s(a: A).",
    H + "v(a: A, n: N) :- r(a: A), N := sum V : s(a: A, n: V), N > 2.",
    H + "v(a: A, n: N) :- r(a: A), N := min V : s(a: A, n: V).",
    H + "v(a: A, b: N) :- r(a: A), N := max V : r(a: A, b: V).",  # max over strings is fine
    H + "v(n: N) :- N := count : s(a: A).",  # no grouping: one row
    H + "v(a: A) :- r(a: A), s(a: A, n: 3), A != 2.",
    H + "v(a: A) :- r(a: A).\nw(a: A, n: N) :- v(a: A), N := count : v(a: A).",  # derived in agg
    H + "v(x: A) :- s(a: A, n: A).",  # a repeated variable
    H + "v(x: A) :- s(a: A, n: 1.5).",  # int and float constants are compatible
    H + "v(x: A) :- r(a: A), A == 1.",  # regression: the int 1, then the rule's period
]


@pytest.mark.parametrize("text", VALID)
def test_valid_programs(text: str) -> None:
    compiled = compile_program(text)
    assert "v" in compiled.relations
    assert compiled.relations["v"].kind == "derived"
    for name, relation in compiled.relations.items():
        if relation.kind == "derived":
            assert set(relation.types) == set(relation.attributes), name


def test_inferred_types() -> None:
    compiled = compile_program(
        H + "v(a: A, b: B, n: N, m: M, k: 1.5) :- r(a: A, b: B), N := count : s(a: A), "
        "M := max V : r(a: A, b: V)."
    )
    assert compiled.relations["v"].types == {
        "a": "int",
        "b": "string",
        "n": "int",
        "m": "string",
        "k": "float",
    }


def check(text: str, aggregates: tuple[str, ...] = ()) -> CheckedProgram:
    """Parse and validate only: these tests do not depend on lowering."""
    return validate(parse(text, "prog.pomo"), text, "prog.pomo", aggregates=aggregates)


# Every feature of the language is accepted (issue 4): each program here used to be
# refused as unsupported, or is a scoping corner that must be valid.
FEATURES = {
    "negation": H + "v(a: A) :- r(a: A), !s(a: A).",
    "negation of a derived relation": H + "w(a: A) :- s(a: A).\nv(a: A) :- r(a: A), !w(a: A).",
    "negation with a constant": H + 'v(a: A) :- r(a: A), !r(a: A, b: "x").',
    "negation grounded by a content id": H + "v(a: A) :- r(a: A), C := s(a: A), !t(c: C).\n"
    "t(c: C) :- C := s(n: 1).",
    "negation grounded by an aggregate result": H + "v(a: A) :- r(a: A), N := count : s(a: A), !s(a: N).",
    "self recursion": H + "v(a: A) :- r(a: A).\nv(a: A) :- v(a: A), s(a: A).",
    "mutual recursion": H + "v(a: A) :- r(a: A).\nv(a: A) :- w(a: A).\nw(a: A) :- v(a: A), s(a: A).",
    "recursion then negation": H + "w(a: A) :- s(a: A).\nw(a: A) :- w(a: A).\nv(a: A) :- r(a: A), !w(a: A).",
    "recursion then aggregate": H + "w(a: A, n: N) :- s(a: A, n: N).\n"
    "w(a: A, n: N) :- w(a: N, n: A).\nv(a: A, t: T) :- r(a: A), T := sum N : w(a: A, n: N).",
    "content id": H + "v(a: A, c: C) :- r(a: A), C := s(a: A).",
    "content id of an empty atom": H + "v(c: C) :- C := r().",
    "content id used twice (a filter)": H + "v(c: C) :- C := r(), C := r(a: 1).",
    "content id compared with a string constant": H + 'v(c: C) :- C := r(), C != "bafk".',
    "cid-typed source attribute": "source p(id: cid, n: int).\nsource q(n: int).\n"
    "v(n: N) :- C := q(n: N), p(id: C).",
    "transient source": "transient source t(a: int).\nsource r(a: int).\nv(a: A) :- r(a: A), t(a: A).",
    "@next copying itself": H + "v(a: A) :- r(a: A).\nv(a: A)@next :- v(a: A).",
    "@next reading a transient source": "transient source t(a: int).\nv(a: A)@next :- t(a: A).",
    "@next reading a relation derived from a transient source": "transient source t(a: int).\n"
    "e(a: A) :- t(a: A).\ne(a: A) :- e(a: A), t(a: 1).\nv(a: A)@next :- e(a: A).",
    "@next negating its own head": "transient source t(a: int).\n"
    "v(a: A)@next :- v(a: A), !t(a: A).\nv(a: A)@next :- t(a: A), !v(a: A).",
    "aggregate result bound by an atom (a filter)": H + "v(a: A) :- r(a: A), A := count : s(a: A).",
    "aggregate result bound by another aggregate": H
    + "v(a: A, n: N) :- r(a: A), N := count : s(a: A), N := count : r(a: A).",
    "aggregate grouped by an earlier aggregate's result": H
    + "v(a: A, m: M) :- r(a: A), N := count : s(a: A), M := count : s(n: N).",
    "user-defined aggregate": H + "v(a: A, m: M) :- r(a: A), M := median N : s(a: A, n: N).",
    "user-defined aggregate of two variables": H + "v(m: M) :- M := pairs A B : s(a: A, n: B).",
    "user-defined aggregate of no variables": H + "v(m: M) :- M := median : s().",
    "bool literals": "source f(on: bool).\nv(on: true) :- f(on: false).\nv(on: X) :- f(on: X), X == true.",
    "unicode in a string": H + 'v(b: "日本 ✓") :- r(b: "é").',
}


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_every_feature_is_accepted(name: str) -> None:
    checked = check(FEATURES[name], aggregates=("median", "pairs"))
    assert "v" in checked.relations
    for relation in checked.relations.values():
        assert set(relation.types) == set(relation.attributes)
    assert checked.order == [n for s in checked.strata for n in s.relations]
    derived = [n for n, r in checked.relations.items() if r.kind == "derived"]
    assert sorted(checked.order) == sorted(derived)


def test_checked_program_fields() -> None:
    text = (
        "transient source clicks(id: int).\nsource box(id: int).\n"
        "checkbox(id: Id, state: false) :- box(id: Id), !seen(id: Id).\n"
        "seen(id: Id) :- box(id: Id), clicks(id: Id).\n"
        "checkbox(id: Id, state: S)@next :- checkbox(id: Id, state: S), !clicks(id: Id).\n"
        "reach(a: A) :- box(id: A).\nreach(a: A) :- reach(a: A), box(id: A).\n"
        "stats(n: N, m: M) :- N := count : reach(), M := median A : reach(a: A).\n"
    )
    checked = check(text, aggregates=("median", "unused", "count"))
    rel = checked.relations
    assert rel["clicks"].transient and not rel["box"].transient
    assert not rel["checkbox"].transient
    assert [r.inductive for r in rel["checkbox"].rules] == [False, True]
    by_name = {n: s for s in checked.strata for n in s.relations}
    assert by_name["reach"].recursive and not by_name["stats"].recursive
    assert checked.order.index("reach") < checked.order.index("stats")
    assert checked.user_aggregates == frozenset({"median"})  # used ones; count stays built in
    assert rel["stats"].types == {"n": "int", "m": "any"}  # a user aggregate's result is untyped
    assert rel["checkbox"].types == {"id": "int", "state": "bool"}


def test_unknown_aggregate_lists_the_user_defined_ones() -> None:
    with pytest.raises(ProgramError) as info:
        check(H + "v(m: M) :- M := mean N : s(n: N).", aggregates=("median",))
    (d,) = info.value.diagnostics
    assert "unknown aggregate 'mean'; expected one of count, sum, min, max, median" in d.message


def test_aggregate_result_bound_elsewhere_becomes_a_filter() -> None:
    """Later passes only see aggregates binding a fresh variable, plus an equality."""
    checked = check(H + "v(a: A) :- r(a: A), A := count : s(a: A).")
    (rule,) = checked.relations["v"].rules
    agg, eq = rule.body[1], rule.body[2]
    assert isinstance(agg, ast.Aggregate) and agg.result.name == "A#1"
    assert isinstance(eq, ast.Constraint) and eq.op == "=="
    assert (eq.left, eq.right) == (agg.result, ast.Variable("A", agg.position))


def test_recursive_types_are_inferred_through_the_cycle() -> None:
    checked = check(
        H + "x(a: A, b: B) :- y(a: A, b: B).\ny(a: A, b: B) :- x(a: A, b: B).\n"
        "y(a: A, b: B) :- r(a: A, b: B).\nz(p: P) :- z(p: P).\n"
    )
    assert checked.relations["x"].types == {"a": "int", "b": "string"}
    assert checked.relations["z"].types == {"p": "any"}  # nothing grounds it: always empty


def test_all_errors_of_a_mixed_program_are_collected() -> None:
    text = (
        H
        + "v(a: A) :- r(a: A), !w(a: A).\n"  # 3: unstratifiable (with w)
        + "w(a: A) :- v(a: A), !s(a: X).\n"  # 4: X never grounded
        + "u(a: A)@next :- r(a: A).\n"  # 5: §2.1
        + "t(a: Z) :- q(a: A).\n"  # 6: unknown q, Z not range restricted
    )
    with pytest.raises(ProgramError) as info:
        check(text)
    got = [(d.position.line, d.position.column) for d in info.value.diagnostics]
    assert got == [(3, 21), (4, 27), (5, 1), (6, 6), (6, 12)], info.value.render()


# The spec's examples (pomo_logic.txt), with our declarations added: the spec has none.
POINT = "source point(x: int, y: int).\n"
PRODUCT = "source product(name: string, category: string, quantity: int).\n"
SPEC_VALID = {
    "§1.1 xCoordinate": POINT + "xCoordinate(x: X) :− point(x: X, y: Y).\nxCoordinate(x: X) :− point(x: X).",
    "§1.1 zeroPoint": POINT + "zeroPoint(x: 0, y: Y) :− point(x: 0, y: Y).\n"
    "zeroPoint(x: X, y: 0) :− point(x: X, y: 0).\n"
    "zeroPoint(x: X, y: Y)@next :− zeroPoint(x: X, y: Y).",
    # lower-case `c` is a variable: identifiers in a term position are variables here.
    "§1.1 popularProfile": "source profile(id: int).\nsource follower(id: int, follows: int).\n"
    "popularProfile(id: X) :−\n    profile(id: X),\n    c := count : follower(follows: X),\n    c >= 1000.",
    "§2.1 checkbox": "transient source clicks(id: int).\n"
    "checkbox(id: Id, state: S)@next     :- checkbox(id: Id, state: S), !clicks(id: Id).\n"
    "checkbox(id: Id, state: true)@next  :- checkbox(id: Id, state: false), clicks(id: Id).\n"
    "checkbox(id: Id, state: false)@next :- checkbox(id: Id, state: true), clicks(id: Id).",
    "§2.2 categoryCount": "source category(name: string).\nsource product(name: string, category: cid).\n"
    "categoryCount(category: Category, count: Count) :-\n    Category := category(),\n"
    "    Count := count : product(category: Category).",
    # The spec writes the head with PersonA/PersonB but the body with personA/personB, and
    # leaves out the final period (see test_spec_suggested_meal_as_written). Variables are
    # case-sensitive identifiers, so we read it with one spelling, the body's.
    "§2.5.2 suggestedMeal": "source person(name: string).\n"
    "source likes(name: string, food: string).\nsource dislikes(name: string, food: string).\n"
    "suggestedMeal(person1: personA, person2: personB, meal: Food) :-\n  person(name: personA),\n"
    "  person(name: personB),\n  personA != personB,\n  likes(name: personA, food: Food),\n"
    "  !dislikes(name: personB, food: Food).",
    "§2.5.3 totalStock": PRODUCT + "totalStock(total: Total) :- Total := sum Quantity : "
    "product(category: Category, quantity: Quantity).",
    "§2.5.3 totalStock per category": PRODUCT + "totalStock(category: Category, total: Total) :-\n"
    "  product(category: Category),\n"
    "  Total := sum Quantity : product(category: Category, quantity: Quantity).",
    "§2.5.4 diagonal": POINT + "diagonal(x: X, y: Y) :- point(x: X, y: Y), X <= Y.",
}


@pytest.mark.parametrize("name", sorted(SPEC_VALID))
def test_spec_valid_examples(name: str) -> None:
    checked = check(SPEC_VALID[name])
    assert checked.order


def test_spec_example_types() -> None:
    count = check(SPEC_VALID["§2.2 categoryCount"]).relations["categoryCount"]
    assert count.types == {"category": "cid", "count": "int"}
    box = check(SPEC_VALID["§2.1 checkbox"]).relations["checkbox"]
    assert box.types == {"id": "int", "state": "bool"} and all(r.inductive for r in box.rules)


# The spec's invalid programs: (text, [(line, column, words)]).
SPEC_INVALID = {
    # §2.5.3: Quantity is bound by the first atom, then aggregated.
    "§2.5.3 aggregated variable bound outside": (
        PRODUCT + "totalStock(total: Total) :-\n"
        "  product(name: Name, category: Category, quantity: Quantity),\n"
        "  Total := sum Quantity : product(quantity: Quantity).",
        [(4, 16, "Quantity is aggregated, so it must not be bound outside")],
    ),
    # §2.5.3: Category is local to the aggregate, so the head's Category is unbound. The
    # spec's text also lacks the ':' before the atom; we parse it and report that too.
    "§2.5.3 aggregate scope does not escape": (
        PRODUCT + "totalStock(category: Category, total: Total) :- Total := sum Quantity "
        "product(category: Category, quantity: Quantity).",
        [
            (2, 22, "Category is not range restricted"),
            (2, 71, "missing ':' between the aggregate and its atom"),
        ],
    ),
    "§2.5.3 the same, with the colon": (
        PRODUCT + "totalStock(category: Category, total: Total) :- Total := sum Quantity : "
        "product(category: Category, quantity: Quantity).",
        [(2, 22, "Category is not range restricted")],
    ),
    "§2.5.2 suggestedMeal with the spec's mixed case": (
        SPEC_VALID["§2.5.2 suggestedMeal"].replace(
            "(person1: personA, person2: personB", "(person1: PersonA, person2: PersonB"
        ),
        [(4, 24, "PersonA is not range restricted"), (4, 42, "PersonB is not range restricted")],
    ),
}


@pytest.mark.parametrize("name", sorted(SPEC_INVALID))
def test_spec_invalid_examples(name: str) -> None:
    text, expected = SPEC_INVALID[name]
    with pytest.raises(ProgramError) as info:
        check(text)
    got = [(d.position.line, d.position.column) for d in info.value.diagnostics]
    assert got == [(line, col) for line, col, _ in expected], info.value.render()
    for d, (_, _, words) in zip(info.value.diagnostics, expected, strict=True):
        assert words in d.message, info.value.render()
    rendered = info.value.render().splitlines()
    line, col, _ = expected[0]
    assert rendered[0].startswith(f"prog.pomo:{line}:{col}: error: ")
    assert rendered[2] == "    " + " " * (col - 1) + "^"


def test_spec_suggested_meal_as_written() -> None:
    """Verbatim, the spec's rule has no final period: a positioned syntax error."""
    text = SPEC_VALID["§2.5.2 suggestedMeal"].removesuffix(".")
    with pytest.raises(ProgramError) as info:
        check(text)
    (d,) = info.value.diagnostics
    assert d.message == "unexpected end of program"
    assert d.position.line == len(text.splitlines())


def test_an_ordered_view_carries_its_order_and_limit() -> None:
    text = H + "view v(a) order by b desc, a limit 10.\nview w(a) order by b.\nview u(a).\n"
    text += "v(a: A, b: B) :- r(a: A, b: B).\nw(a: A, b: B) :- r(a: A, b: B).\nu(a: A) :- r(a: A)."
    checked = validate(parse(text), text)
    assert checked.view_orders["v"].by == (("b", True), ("a", False))
    assert checked.view_orders["v"].limit == 10
    assert checked.view_orders["w"].by == (("b", False),) and checked.view_orders["w"].limit is None
    assert "u" not in checked.view_orders
    # the words of the clause stay names elsewhere
    named = H + "order(limit: A) :- r(a: A).\nview order(limit) order by limit desc."
    assert validate(parse(named), named).view_orders["order"].by == (("limit", True),)


def test_an_order_by_an_attribute_of_no_one_type_is_refused() -> None:
    text = H + "v(a: A, m: M) :- r(a: A), M := pick B : r(a: A, b: B).\nview v(a) order by m."
    with pytest.raises(ProgramError) as err:
        validate(parse(text), text, aggregates=("pick",))
    message = str(err.value)
    assert "4:20" in message and "ordered by 'm', whose values have no one type (any)" in message
