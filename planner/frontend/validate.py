"""Pass 2: AST -> CheckedProgram: names, attributes, scoping, types, time, strata.

Every problem is reported with its position; all problems of a program are
collected before the pass fails. The checks (pomo_logic.txt, DESIGN §2):

- names: unknown relations and attributes, duplicate declarations, rules that
  derive into a source, a derived relation whose rules disagree on its attributes
  (relations.py, rule_checks.py);
- range restriction and grounding (§1.1, §2.4): a variable is *bound* by a
  positive atom, by `C := atom` (C and the atom's variables) or as an
  aggregate's result. Head variables, and the variables of negations and
  constraints, must be bound (rule_checks.py);
- aggregate scoping (§2.5.3): the variables of an aggregate's atom that the
  rest of the body does not bind are local to it and do not escape; the
  aggregated variables must be local and appear exactly once in the atom;
- types: sources declare theirs; a derived relation's are inferred from its
  rules (to a fixed point, so recursion works) and must agree across rules
  (type_inference.py);
- time (§2.1): see `dependencies.instantaneous` and `RuleChecker.check_inductive`;
- stratification (§2.3): see dependencies.py and planner/stratify.py.

Normalisation: an aggregate whose result variable is already bound elsewhere
in the body (the spec's "if this unification fails ... the search fails") is
rewritten to bind a fresh variable `N#k` plus the constraint `N#k == N`, so
later passes only ever see aggregates that bind a new variable.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.dependencies import (
    check_recursive_cids,
    dependency_edges,
    instantaneous,
    stratify_relations,
)
from pomoview.planner.frontend.errors import ErrorSink
from pomoview.planner.frontend.relations import (
    CheckedProgram,
    Relation,
    ViewOrder,
    check_sources,
    collect_heads,
    variables,
)
from pomoview.planner.frontend.rule_checks import AGGREGATES, check_rules
from pomoview.planner.frontend.type_inference import infer_types, type_the_untyped
from pomoview.planner.frontend.values import ANY, NUMERIC, TYPES

# Re-exported: the planner and the server import the pass's result, and the language's
# names, from here.
__all__ = [
    "AGGREGATES",
    "ANY",
    "NUMERIC",
    "TYPES",
    "CheckedProgram",
    "Relation",
    "dependency_edges",
    "validate",
]


def _normalise(rule: ast.Rule) -> ast.Rule:
    """Rewrites `N := agg ...` with N bound elsewhere to `N#k := agg ..., N#k == N`."""
    earlier: set[str] = set()
    for lit in rule.body:
        if isinstance(lit, ast.Atom):
            earlier |= {v.name for v in variables(lit)}
        elif isinstance(lit, ast.CidBinding):
            earlier |= {v.name for v in variables(lit.atom)} | {lit.variable.name}
    body: list[ast.BodyLiteral] = []
    extra: list[ast.BodyLiteral] = []
    for k, lit in enumerate(rule.body):
        if isinstance(lit, ast.Aggregate) and lit.result.name in earlier:
            fresh = ast.Variable(f"{lit.result.name}#{k}", lit.result.position)
            body.append(replace(lit, result=fresh))
            extra.append(ast.Constraint(fresh, "==", lit.result, lit.result.position))
            continue
        if isinstance(lit, ast.Aggregate):
            earlier.add(lit.result.name)
        body.append(lit)
    return rule if not extra else replace(rule, body=tuple(body + extra))


def _check_views(
    program: ast.Program, relations: dict[str, Relation], errors: ErrorSink
) -> tuple[dict[str, tuple[str, ...]], dict[str, ViewOrder]]:
    views: dict[str, tuple[str, ...]] = {}
    orders: dict[str, ViewOrder] = {}
    for view in program.views:
        relation = relations.get(view.name)
        if relation is None:
            errors.error(view.position, f"view of unknown relation {view.name!r}")
            continue
        if relation.kind != "derived":
            errors.error(view.position, f"{view.name!r} is a source; a view names a derived relation")
            continue
        for attr in view.key:
            if attr not in relation.attributes:
                errors.error(view.position, f"{view.name!r} has no attribute {attr!r}")
        if view.name in views:
            errors.error(view.position, f"view {view.name!r} is declared twice")
        views[view.name] = view.key
        order = _check_order(view, relation, errors)
        if order is not None:
            orders[view.name] = order
    return views, orders


# The types whose values compare with each other (an `any` attribute may mix them).
_ORDERED_TYPES = ("int", "float", "string", "bool", "bytes", "cid")


def _check_order(view: ast.ViewDecl, relation: Relation, errors: ErrorSink) -> ViewOrder | None:
    """The view's order and limit, checked; None for a view without `order by`."""
    if view.limit is not None and view.limit < 1:
        errors.error(
            view.limit_position or view.position,
            f"the limit of view {view.name!r} is {view.limit}; a limit is a positive int",
        )
    if not view.order:
        if view.limit is not None:
            errors.error(
                view.limit_position or view.position,
                f"view {view.name!r} has a limit but no order; write `order by ...` before `limit`",
            )
        return None
    seen: set[str] = set()
    for item in view.order:
        if item.attribute not in relation.attributes:
            errors.error(
                item.position,
                f"view {view.name!r} is ordered by {item.attribute!r}, "
                f"which {view.name!r} has no rows of: its attributes are {', '.join(relation.attributes)}",
            )
        elif relation.types.get(item.attribute) not in _ORDERED_TYPES:
            errors.error(
                item.position,
                f"view {view.name!r} is ordered by {item.attribute!r}, whose "
                f"values have no one type ({relation.types.get(item.attribute)}) and cannot be compared",
            )
        if item.attribute in seen:
            errors.error(item.position, f"view {view.name!r} is ordered by {item.attribute!r} twice")
        seen.add(item.attribute)
    return ViewOrder(tuple((i.attribute, i.descending) for i in view.order), view.limit)


def validate(
    program: ast.Program,
    text: str,
    filename: str = "<program>",
    aggregates: Collection[str] = (),
) -> CheckedProgram:
    """Checks `program`; `aggregates` names the user-defined aggregate functions."""
    user = frozenset(aggregates) - set(AGGREGATES)  # the built-ins keep their meaning
    errors = ErrorSink(text, filename)
    relations = check_sources(program, errors)
    collect_heads(program, relations, errors)
    strata = stratify_relations(relations, errors)
    check_recursive_cids(relations, strata, errors)
    order = [name for stratum in strata for name in stratum.relations]
    instant = instantaneous(relations)
    rules = [rule for name in order for rule in relations[name].rules]
    # Inference checks a rule again each time the types it reads grow, so it reports to a
    # scratch sink; the checks then run once over the final types, reporting each problem once.
    infer_types(rules, relations, user, instant, ErrorSink(text, filename))
    derived = [r for r in relations.values() if r.kind == "derived"]
    used = check_rules(rules, relations, errors, user, instant)
    type_the_untyped(derived)
    views, orders = _check_views(program, relations, errors)
    errors.raise_if_any()
    for rel in derived:
        rel.rules = [_normalise(rule) for rule in rel.rules]
    return CheckedProgram(text, relations, views, order, strata, frozenset(used), orders)
