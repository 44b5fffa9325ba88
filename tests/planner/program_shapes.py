"""Programs of a chosen depth, for the tests of deep plans and of the plan-depth limit."""

from __future__ import annotations


def wide(atoms: int) -> str:
    """One rule whose body is a path of `atoms` edges: a left-deep chain of `atoms` joins."""
    body = ", ".join(f"e(a: X{i}, b: X{i + 1})" for i in range(atoms))
    return f"source e(a: int, b: int).\nview w(a).\nw(a: X0, b: X{atoms}) :- {body}.\n"


def chain(n: int) -> str:
    """n relations, each reading the one before it through an antijoin."""
    rules = ["r0(a: A, b: B) :- e(a: A, b: B)."]
    rules += [f"r{i}(a: A, b: B) :- r{i - 1}(a: A, b: B), !e(a: B, b: A)." for i in range(1, n + 1)]
    return f"source e(a: int, b: int).\nview r{n}(a).\n" + "\n".join(rules) + "\n"
