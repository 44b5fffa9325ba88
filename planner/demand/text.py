"""PomoLogic text of AST rules and declarations: what a rewriting pass (magic.py) hands to
the front end again, so that its output is parsed, validated and compiled like any program.
Printing then parsing gives back the same rules (tests/planner/test_magic_sets.py)."""

from __future__ import annotations

import json

from pomoview.planner.frontend import ast


def term(t: ast.Term) -> str:
    if isinstance(t, ast.Variable):
        return t.name
    value = t.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # the grammar's strings: double quotes, backslash escapes
    return repr(value)


def atom(a: ast.Atom) -> str:
    return f"{a.relation}({', '.join(f'{arg.attribute}: {term(arg.term)}' for arg in a.args)})"


def literal(lit: ast.BodyLiteral) -> str:
    if isinstance(lit, ast.Atom):
        return atom(lit)
    if isinstance(lit, ast.Negation):
        return f"!{atom(lit.atom)}"
    if isinstance(lit, ast.CidBinding):
        return f"{lit.variable.name} := {atom(lit.atom)}"
    if isinstance(lit, ast.Aggregate):
        arguments = "".join(f" {v.name}" for v in lit.arguments)
        return f"{lit.result.name} := {lit.function}{arguments} : {atom(lit.atom)}"
    return f"{term(lit.left)} {lit.op} {term(lit.right)}"


def rule(r: ast.Rule) -> str:
    head = atom(r.head) + (" @next" if r.inductive else "")
    if not r.body:
        return f"{head}."
    return f"{head} :- {', '.join(literal(lit) for lit in r.body)}."


def source(name: str, attributes: list[tuple[str, str]]) -> str:
    return f"source {name}({', '.join(f'{a}: {t}' for a, t in attributes)})."
