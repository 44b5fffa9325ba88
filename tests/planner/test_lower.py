"""Lowering to PomoRA: the shapes pomo_logic §3.1 prescribes (semantics are tested through
the Engine and against clingo; these pin the plan each pass produces)."""

from __future__ import annotations

from pomoview.planner.compile import compile_program
from pomoview.planner.ir import ra
from pomoview.planner.ir.lower import lower

DECLS = """
source a(x: int, y: int).
source b(x: int).
source c(z: int).
"""


def body_of(text: str, relation: str = "r") -> ra.Expr:
    """The rule's expression under its head projection and the relation's Distinct, as
    lowering makes it (before planner/ir/sets.py drops the Distinct of a set)."""
    expr = lower(compile_program(DECLS + text).checked).exprs[relation]
    assert isinstance(expr, ra.Distinct) and isinstance(expr.input, ra.Project)
    return expr.input.input


def test_fold_picks_semijoin_product_and_join() -> None:
    semi = body_of("r(x: X, y: Y) :- a(x: X, y: Y), b(x: X).")
    assert isinstance(semi, ra.SemiJoin) and semi.on == ("X",)
    reverse = body_of("r(x: X, y: Y) :- b(x: X), a(x: X, y: Y).")  # the left side is contained
    assert isinstance(reverse, ra.SemiJoin) and reverse.schema == ("X", "Y")
    product = body_of("r(x: X, y: Z) :- b(x: X), c(z: Z).")
    assert isinstance(product, ra.Join) and product.on == ()
    join = body_of("r(x: X, y: Z) :- a(x: X, y: Y), a(x: Y, y: Z).")
    assert isinstance(join, ra.Join) and join.on == ("Y",)


def test_order_selections_constraints_negations_aggregates() -> None:
    expr = body_of("r(x: X, y: N) :- a(x: X, y: Y), X < Y, !b(x: Y), N := count : c(z: X).")
    assert isinstance(expr, ra.Aggregate) and expr.group == ("X",)
    anti = expr.body
    assert isinstance(anti, ra.AntiJoin) and anti.on == ("Y",)
    assert isinstance(anti.left, ra.Select)


def test_constraints_and_negations_on_aggregate_results_follow_the_aggregate() -> None:
    expr = body_of("r(x: X, y: N) :- b(x: X), N := count : a(x: X), N > 1, !c(z: N).")
    assert isinstance(expr, ra.AntiJoin) and isinstance(expr.left, ra.Select)
    assert isinstance(expr.left.input, ra.Aggregate)


def test_recursive_stratum_is_a_fixpoint_and_negation_becomes_a_difference() -> None:
    program = compile_program(
        DECLS
        + """
t(x: X, y: Y) :- a(x: X, y: Y).
t(x: X, y: Z) :- t(x: X, y: Y), a(x: Y, y: Z), !b(x: Z).
"""
    )
    expr = program.exprs["t"]
    assert isinstance(expr, ra.Recursive) and expr.fixpoint.relations == ("t",)
    seen: list[type] = []

    def walk(e: ra.Expr) -> None:
        seen.append(type(e))
        for child in ra.children(e):
            walk(child)

    walk(expr.fixpoint.bodies[0])
    assert ra.Recur in seen and ra.Difference in seen and ra.AntiJoin not in seen


def test_next_adds_a_hidden_relation_and_an_inductive_one() -> None:
    program = compile_program(
        "transient source e(x: int).\np(x: X) :- e(x: X).\np(x: X)@next :- p(x: X).\n"
    )
    assert program.hidden_sources == {"p@next": ("x",)}
    assert program.inductive == {"p": "p@ind"}
    assert "p@ind" in program.exprs
