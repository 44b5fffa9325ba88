"""The built-in sources: the server's own state as relations (3DF's logging and
instrumentation as sources the query language reads), present in every program without a
declaration, and read-only.

A program that reads one gets it as a relation of kind "builtin" (a source no one writes:
the server fills it, `server/views/introspection.py`); a program that does not read one
does not see it, so its relations, Describe and store are as before. Declaring one, deriving
into one and writing to one are errors naming it.
"""

from __future__ import annotations

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import ErrorSink, Position

# name -> (attribute, type) in order.
BUILTIN_SOURCES: dict[str, tuple[tuple[str, str], ...]] = {
    # One row per stateful node and view it serves (a state shared by views: a row each).
    "pomoview_state": (
        ("node", "string"),
        ("view", "string"),
        ("operator", "string"),
        ("key", "string"),
        ("partial", "bool"),
        ("keys", "int"),
        ("rows", "int"),
        ("bytes", "int"),
    ),
    "pomoview_upqueries": (
        ("node", "string"),
        ("upqueries", "int"),
        ("evictions", "int"),
        ("dropped", "int"),
    ),
    "pomoview_epochs": (("applied", "int"), ("durable", "int"), ("flushed", "int")),
}


def read_only(name: str) -> str:
    """Why a write to the built-in source `name` is refused."""
    return f"{name!r} is a built-in source (the server's own state, filled by the server); it is read-only"


def used_builtins(program: ast.Program, errors: ErrorSink) -> dict[str, tuple[tuple[str, str], ...]]:
    """The built-in sources `program` reads; a declaration of one is an error."""
    for decl in program.sources:
        if decl.name in BUILTIN_SOURCES:
            errors.error(decl.position, f"{decl.name!r} is a built-in source; it needs no declaration")
    used: dict[str, tuple[tuple[str, str], ...]] = {}
    for rule in program.rules:
        for lit in rule.body:
            if isinstance(lit, ast.Constraint):
                continue
            atom = lit if isinstance(lit, ast.Atom) else lit.atom
            if atom.relation in BUILTIN_SOURCES:
                used[atom.relation] = BUILTIN_SOURCES[atom.relation]
    return used


POSITION = Position(0, 0)  # a built-in source's: it is declared nowhere
