"""Program size measures, for limits set by whoever runs the planner (the server's flags).

Pure and iterative: each measure is one pass over the AST or over the relations in
dependency order, so a program too large to accept is measured without recursing into it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import Position
from pomoview.planner.frontend.validate import CheckedProgram


@dataclass(frozen=True)
class WidestRule:
    """The rule with the most body literals: how many, where, and its head relation."""

    literals: int
    position: Position
    head: str


def rule_count(program: ast.Program) -> int:
    return len(program.rules)


def widest_rule(program: ast.Program) -> WidestRule | None:
    best: WidestRule | None = None
    for rule in program.rules:
        if best is None or len(rule.body) > best.literals:
            best = WidestRule(len(rule.body), rule.position, rule.head.relation)
    return best


def _body_atom(literal: ast.BodyLiteral) -> ast.Atom | None:
    if isinstance(literal, ast.Atom):
        return literal
    if isinstance(literal, ast.Negation | ast.CidBinding | ast.Aggregate):
        return literal.atom
    return None  # a constraint reads no relation


@dataclass(frozen=True)
class PlanDepth:
    """An estimate of the longest chain of dataflow operators from a relation down to the
    sources: `depth` levels, reached at `relation`, through `chain` (deepest first)."""

    depth: int
    relation: str
    chain: tuple[str, ...]


def plan_depth(program: CheckedProgram) -> PlanDepth | None:
    """The deepest derived relation's estimated operator depth.

    A rule's plan is a left-deep tree over its body literals (a join, antijoin or aggregate
    join per literal), on top of the plans of the relations it reads, and every relation
    ends in a distinct: so a relation's depth is 1 + the most, over its rules, of the body's
    length plus the deepest relation the body reads. A relation of the same recursive stratum
    counts as 0 (it is read through the stratum's feedback loop, not nested). The upquery of
    a key recurses once or twice per level, so this bounds the stack a lookup needs."""
    depth: dict[str, int] = {}
    via: dict[str, str] = {}
    for name in program.order:  # dependencies first
        best, below = 0, ""
        for rule in program.relations[name].rules:
            deepest, deepest_name = 0, ""
            for literal in rule.body:
                atom = _body_atom(literal)
                if atom is not None and depth.get(atom.relation, 0) > deepest:
                    deepest, deepest_name = depth[atom.relation], atom.relation
            if len(rule.body) + deepest > best:
                best, below = len(rule.body) + deepest, deepest_name
        depth[name] = 1 + best
        if below:
            via[name] = below
    if not depth:
        return None
    top = max(depth, key=depth.__getitem__)
    chain = [top]
    while chain[-1] in via:
        chain.append(via[chain[-1]])
    return PlanDepth(depth[top], top, tuple(chain))
