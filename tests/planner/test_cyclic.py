"""The pass cyclic.py: which rule bodies become a MultiJoin, and what it holds (the answers
are tested through the Engine: tests/planner/test_multi_join_engine.py)."""

from __future__ import annotations

import pytest

from pomoview.planner.compile import compile_program
from pomoview.planner.ir import ra
from pomoview.planner.ir.cyclic import MAX_ATOMS, cyclic, multi_joins

DECLS = """
source e(src: int, dst: int).
source f(src: int, dst: int).
source t(a: int, b: int, c: int).
source w(x: int, y: int, z: int).
source n(v: int).
"""


def body_of(text: str, relation: str = "r") -> ra.Expr:
    """The rule's expression after the pass, under its head projection (and its Distinct,
    unless planner/ir/sets.py dropped it: a body that keeps every variable is a set)."""
    exprs = multi_joins(compile_program(DECLS + text).exprs)
    expr = exprs[relation]
    if isinstance(expr, ra.Distinct):
        expr = expr.input
    assert isinstance(expr, ra.Project)
    return expr.input


def edges(pairs: str) -> str:
    """`e(src: A, dst: B), ...` for the pairs of one-letter variables `AB CD ...`."""
    return ", ".join(f"e(src: {p[0]}, dst: {p[1]})" for p in pairs.split())


def multi(expr: ra.Expr) -> ra.MultiJoin:
    assert isinstance(expr, ra.MultiJoin), expr
    return expr


CYCLIC = {
    "triangle": "r(a: A, b: B, c: C) :- " + edges("AB BC AC") + ".",
    "4-cycle": "r(a: A, b: C) :- " + edges("AB BC CD DA") + ".",
    "4-clique": "r(a: A, b: D) :- " + edges("AB AC AD BC BD CD") + ".",
    "triangle over three relations": (
        "r(a: A, b: B, c: C) :- e(src: A, dst: B), f(src: B, dst: C), e(src: A, dst: C)."
    ),
}

ACYCLIC = {
    "path": "r(a: A, b: D) :- " + edges("AB BC CD") + ".",
    "star": "r(a: A, b: D) :- " + edges("AB AC AD") + ".",
    "two atoms": "r(a: A, b: B) :- " + edges("AB BA") + ".",
    # Each edge of the triangle lies inside t's atom: α-acyclic, the binary plan stays.
    "triangle inside a wider atom": ("r(a: A, b: B) :- t(a: A, b: B, c: C), " + edges("AB BC AC") + "."),
}


@pytest.mark.parametrize("name", list(CYCLIC))
def test_cyclic_bodies_become_a_multi_join(name: str) -> None:
    expr = multi(body_of(CYCLIC[name]))
    assert len(expr.atoms) == CYCLIC[name].count("(src:")
    # One input object per relation: the operator indexes e once however many atoms read it.
    inputs = {id(e) for e, _ in expr.atoms}
    assert len(inputs) == len({e.relation for e, _ in expr.atoms if isinstance(e, ra.Scan)})
    variables = {t for _, terms in expr.atoms for t in terms if isinstance(t, str)}
    assert set(expr.variables) == variables


@pytest.mark.parametrize("name", list(ACYCLIC))
def test_acyclic_bodies_keep_binary_joins(name: str) -> None:
    expr = body_of(ACYCLIC[name])
    assert isinstance(expr, (ra.Join, ra.SemiJoin)), expr
    # The pass gives back the very expressions it does not rewrite.
    before = compile_program(DECLS + ACYCLIC[name]).exprs
    assert multi_joins(before)["r"] is before["r"]


def test_comparisons_become_constraints_and_negations_negated_atoms() -> None:
    expr = body_of(
        "r(a: A, b: B, c: C) :- " + edges("AB BC AC") + ", A < B, 3 > C, !n(v: A), !e(src: C, dst: 2)."
    )
    join = multi(expr)
    assert set(join.constraints) == {
        ra.Compare(ra.Col("A"), "<", ra.Col("B")),
        ra.Compare(ra.Col("C"), "<", ra.Const(3)),  # the constant moved to the right
    }
    negated = {e.relation: terms for e, terms in join.negated if isinstance(e, ra.Scan)}
    assert negated == {"n": ("A",), "e": ("C", ra.Const(2))}
    # e's negated atom reads the positive atoms' scan: one object, indexed once.
    assert len({id(e) for e, _ in join.atoms + join.negated if getattr(e, "relation", "") == "e"}) == 1


def test_a_negation_over_constants_only_stays_an_antijoin_above() -> None:
    expr = body_of("r(a: A, b: B, c: C) :- " + edges("AB BC AC") + ", !n(v: 5).")
    assert isinstance(expr, ra.AntiJoin) and expr.on == ()
    assert not multi(expr.left).negated


def test_constants_are_terms_and_other_atoms_stay_whole() -> None:
    # w binds its z attribute to a constant: a term; e repeats a variable: kept whole (a
    # Select under a Project), its columns the variables.
    expr = multi(
        body_of(
            "r(a: A, b: B) :- w(x: A, y: B, z: 7), e(src: B, dst: C), f(src: C, dst: A), e(src: A, dst: A)."
        )
    )
    by_relation = {e.relation: terms for e, terms in expr.atoms if isinstance(e, ra.Scan)}
    assert by_relation["w"] == ("A", "B", ra.Const(7))
    whole = [(e, terms) for e, terms in expr.atoms if not isinstance(e, ra.Scan)]
    assert len(whole) == 1 and whole[0][1] == ("A",) and isinstance(whole[0][0], ra.Project)


def test_aggregate_body_and_derived_relations() -> None:
    text = (
        "tri(a: A, b: B, c: C) :- " + edges("AB BC AC") + ".\n"
        "r(a: A, b: N) :- tri(a: A, b: B, c: C), N := count : e(src: A, dst: X).\n"
    )
    exprs = multi_joins(compile_program(DECLS + text).exprs)
    tri = exprs["tri"]  # a set, so without its Distinct (planner/ir/sets.py)
    assert isinstance(tri, ra.Project) and isinstance(tri.input, ra.MultiJoin)
    r = exprs["r"]
    assert isinstance(r, ra.Distinct) and isinstance(r.input, ra.Project)
    assert isinstance(r.input.input, ra.Aggregate)


def recursive_rule(text: str, relation: str = "reach") -> ra.Expr:
    """The second rule's expression inside the stratum's loop, under its head projection."""
    expr = multi_joins(compile_program(DECLS + text).exprs)[relation]
    assert isinstance(expr, ra.Recursive)
    body = expr.fixpoint.bodies[expr.fixpoint.relations.index(relation)]
    assert isinstance(body, ra.Distinct) and isinstance(body.input, ra.Union)
    rule = body.input.inputs[1]
    assert isinstance(rule, ra.Project)
    return rule.input


def leaves(expr: ra.Expr) -> list[ra.Expr]:
    if isinstance(expr, ra.Select):
        return leaves(expr.input)
    if isinstance(expr, (ra.Join, ra.SemiJoin)):
        return leaves(expr.left) + leaves(expr.right)
    return [expr]


CLOSURE = "reach(src: A, dst: B) :- e(src: A, dst: B).\n"


def test_a_cycle_through_one_recursive_atom_is_one_multi_join_in_the_loop() -> None:
    # The triangle passes through reach: one MultiJoin with reach's atom whole (a NestedWcoj
    # in the loop, dataflow/operators/nested_wcoj.py), its comparison inside.
    text = CLOSURE + (
        "reach(src: A, dst: C) :- reach(src: A, dst: B), e(src: B, dst: C), f(src: A, dst: C), A != C.\n"
    )
    (join,) = leaves(recursive_rule(text))
    atoms = multi(join).atoms
    assert [terms for _, terms in atoms] == [("A", "B"), ("B", "C"), ("A", "C")]
    recursive = atoms[0][0]
    assert isinstance(recursive, ra.Project) and isinstance(recursive.input, ra.Recur)
    assert [e.relation for e, _ in atoms[1:] if isinstance(e, ra.Scan)] == ["e", "f"]
    assert multi(join).constraints == (ra.Compare(ra.Col("A"), "!=", ra.Col("C")),)


def test_a_cycle_through_two_recursive_atoms_stays_binary() -> None:
    # The product of two recursive deltas (reach with itself) is not the operator's: binary.
    text = CLOSURE + (
        "reach(src: A, dst: C) :- reach(src: A, dst: B), reach(src: B, dst: C), e(src: A, dst: C).\n"
    )
    before = compile_program(DECLS + text).exprs
    assert multi_joins(before)["reach"] is before["reach"]


def test_a_recursive_body_joins_its_cyclic_atoms_outside_the_recursion_as_one_multi_join() -> None:
    text = CLOSURE + (
        "reach(src: X, dst: Z) :- reach(src: X, dst: Y), e(src: Y, dst: Z), e(src: Z, dst: W), "
        "f(src: Y, dst: W), Z < W, X != W.\n"
    )
    body = recursive_rule(text)
    # X != W reads the recursion's X: it stays above the loop's join.
    assert isinstance(body, ra.Select) and body.predicates == (ra.Compare(ra.Col("X"), "!=", ra.Col("W")),)
    recur, joined = leaves(body)
    assert isinstance(recur, ra.Project) and isinstance(recur.input, ra.Recur)
    # The triangle Y Z W, its comparison inside, projected on what the rest reads (W for X != W).
    join = multi(joined)
    assert join.variables == ("Y", "Z", "W")
    assert [terms for _, terms in join.atoms] == [("Y", "Z"), ("Z", "W"), ("Y", "W")]
    assert join.constraints == (ra.Compare(ra.Col("Z"), "<", ra.Col("W")),)
    # Without X != W, W is read by no one else: projected away.
    text = text.replace(", X != W", "")
    recur, joined = leaves(recursive_rule(text))
    assert isinstance(joined, ra.Project) and joined.schema == ("Y", "Z")


def test_only_the_cyclic_component_of_a_recursive_body_becomes_a_multi_join() -> None:
    # e(B, C), f(C, D) join the recursion (a path: binary); the triangle X Y Z shares no
    # variable with them: its own component, a MultiJoin projected on no column (a guard).
    text = CLOSURE + (
        "reach(src: A, dst: D) :- reach(src: A, dst: B), e(src: B, dst: C), f(src: C, dst: D), "
        + edges("XY YZ XZ")
        + ".\n"
    )
    found = leaves(recursive_rule(text))
    assert len(found) == 4
    guard = found[3]
    assert isinstance(guard, ra.Project) and guard.schema == () and len(multi(guard.input).atoms) == 3
    assert not any(isinstance(leaf, ra.MultiJoin) for leaf in found[:3])
    # With f(A, C) the recursion's atom closes a triangle too: one MultiJoin through it, the
    # guard above it.
    text = text.replace("f(src: C, dst: D)", "f(src: A, dst: C)").replace("dst: D) :-", "dst: C) :-")
    through, guard = leaves(recursive_rule(text))
    assert len(multi(through).atoms) == 3 and isinstance(guard, ra.Project) and guard.schema == ()


def test_a_stratum_of_two_relations_is_rewritten_once() -> None:
    text = (
        "p(src: A, dst: B) :- e(src: A, dst: B).\n"
        "p(src: A, dst: C) :- q(src: A, dst: B), " + edges("BC CW BW") + ".\n"
        "q(src: A, dst: B) :- p(src: A, dst: B).\n"
    )
    before = compile_program(DECLS + text).exprs
    after = multi_joins(before)
    p, q = after["p"], after["q"]
    assert isinstance(p, ra.Recursive) and isinstance(q, ra.Recursive)
    # One loop for both, the rewritten one: the builder builds one Child per Fixpoint object.
    assert p.fixpoint is q.fixpoint
    assert isinstance(before["p"], ra.Recursive) and p.fixpoint is not before["p"].fixpoint
    recur, joined = leaves(recursive_rule(text, "p"))
    assert isinstance(joined, ra.Project) and joined.schema == ("B", "C") and multi(joined.input)


def test_too_many_atoms_stay_binary() -> None:
    ring = [f"e(src: X{i}, dst: X{(i + 1) % (MAX_ATOMS + 1)})" for i in range(MAX_ATOMS + 1)]
    expr = body_of("r(a: X0, b: X1) :- " + ", ".join(ring) + ".")
    assert isinstance(expr, (ra.Join, ra.SemiJoin))
    ring = ring[: MAX_ATOMS - 1] + [f"e(src: X{MAX_ATOMS - 1}, dst: X0)"]
    assert isinstance(body_of("r(a: X0, b: X1) :- " + ", ".join(ring) + "."), ra.MultiJoin)


def test_gyo() -> None:
    def hyper(*atoms: str) -> list[frozenset[str]]:
        return [frozenset(a) for a in atoms]

    assert cyclic(hyper("ab", "bc", "ca"))
    assert cyclic(hyper("ab", "bc", "cd", "da"))
    assert cyclic(hyper("ab", "bc", "cd", "da", "x"))  # a cycle plus a disconnected atom
    assert not cyclic(hyper("ab", "bc", "cd"))
    assert not cyclic(hyper("ab", "ab", "ab"))  # equal atoms do not remove each other
    assert not cyclic(hyper("abc", "ab", "bc", "ca"))
    assert not cyclic(hyper("ab", "cd", "ef"))  # a product


def test_rules_with_one_cyclic_body_share_its_multi_join() -> None:
    body = edges("AB BC AC")
    text = f"p(a: A, b: B) :- {body}.\nq(c: C) :- {body}.\nr(a: A) :- {body}, A < C.\n"
    exprs = multi_joins(compile_program(DECLS + text).exprs)
    assert _join_of(exprs, "p") is _join_of(exprs, "q")
    assert _join_of(exprs, "r") is not _join_of(exprs, "p")  # its comparison is a constraint of its own join


def _join_of(exprs: dict[str, ra.Expr], name: str) -> ra.MultiJoin:
    """The first MultiJoin under relation `name`'s expression."""
    stack = [exprs[name]]
    while stack:
        expr = stack.pop()
        if isinstance(expr, ra.MultiJoin):
            return expr
        stack.extend(ra.children(expr))
    raise AssertionError(f"no MultiJoin in {name}")


def test_bodies_equal_up_to_variable_names_share_one_multi_join() -> None:
    """A body with its variables named apart is the first one's MultiJoin under a Project
    renaming its columns; a negation folds into the join first, and is shared alike; a
    body of another shape, or another comparison, has its own."""
    text = (
        f"p(a: A, b: B, c: C) :- {edges('AB BC AC')}.\n"
        f"q(x: X, y: Y, z: Z) :- {edges('XY YZ XZ')}.\n"
        f"s(x: X, y: Y) :- {edges('XY YZ XZ')}, !n(v: Y).\n"
        f"u(a: A, b: B) :- {edges('AB BC AC')}, !n(v: B).\n"
        f"k(x: X) :- {edges('XY YZ ZX')}.\n"  # a cyclic triangle: another form
        f"l(x: X) :- {edges('XY YZ XZ')}, X < Z.\n"
        f"m(x: X) :- {edges('XY YZ XZ')}, Y < Z.\n"
    )
    exprs = multi_joins(compile_program(DECLS + text).exprs)
    p, q = _join_of(exprs, "p"), _join_of(exprs, "q")
    assert p is q
    renaming = exprs["q"]
    while not (isinstance(renaming, ra.Project) and renaming.input is p):
        (renaming,) = ra.children(renaming)
    assert dict(renaming.outputs) == {"X": ra.Col("A"), "Y": ra.Col("B"), "Z": ra.Col("C")}
    s, u = _join_of(exprs, "s"), _join_of(exprs, "u")
    assert s is u and len(s.negated) == 1 and s is not p
    assert _join_of(exprs, "k") is not p
    assert _join_of(exprs, "l") is not _join_of(exprs, "m")  # X < Z against Y < Z
