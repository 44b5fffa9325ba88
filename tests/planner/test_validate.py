"""Validation: each kind of error is a ProgramError at the exact line and column."""

from __future__ import annotations

import pytest

from pomoview.planner.compile import compile_program
from pomoview.planner.errors import ProgramError

H = "source r(a: int, b: string).\nsource s(a: int, n: int).\n"  # lines 1-2

# name -> (program, line, column, words of the message, unsupported)
ERRORS: dict[str, tuple[str, int, int, str, bool]] = {
    "unknown relation": (H + "v(a: A) :- q(a: A).", 3, 12, "unknown relation 'q'", False),
    "unknown relation in aggregate": (
        H + "v(a: A, n: N) :- r(a: A), N := count : q(a: A).",
        3,
        40,
        "unknown relation 'q'",
        False,
    ),
    "unknown attribute": (H + "v(a: A) :- r(a: A, c: C).", 3, 20, "no attribute 'c'", False),
    "attribute twice in atom": (H + "v(a: A) :- r(a: A, a: A).", 3, 20, "appears twice", False),
    "attribute twice in head": (H + "v(a: A, a: A) :- r(a: A).", 3, 9, "twice in the head", False),
    "type clash between atoms": (
        H + "v(a: A) :- r(a: A), r(b: A).",
        3,
        26,
        "type clash: A is int elsewhere but string",
        False,
    ),
    "type clash with a constant": (H + "v(a: A) :- r(a: A, b: 3).", 3, 23, "type clash", False),
    "type clash in a comparison": (
        H + 'v(a: A) :- r(a: A), A < "x".',
        3,
        21,
        "cannot compare int with string",
        False,
    ),
    "type clash across rules": (
        H + "v(a: A) :- r(a: A).\nv(a: B) :- r(b: B).",
        4,
        3,
        "v.a is int in another rule",
        False,
    ),
    "range restriction": (H + "v(a: A, c: C) :- r(a: A).", 3, 12, "C is not range restricted", False),
    "range restriction (local aggregate variable)": (
        H + "v(a: A, u: U) :- r(a: A), N := count : s(a: A, n: U).",
        3,
        12,
        "U is not range restricted",
        False,
    ),
    "constraint not grounded": (H + "v(a: A) :- r(a: A), C > 1.", 3, 21, "not grounded", False),
    "constraint on a local aggregate variable": (
        H + "v(a: A) :- r(a: A), N := count : s(a: A, n: U), U > 1.",
        3,
        49,
        "not grounded",
        False,
    ),
    "aggregated variable bound outside": (
        H + "v(a: A, t: T) :- s(a: A, n: V), T := sum V : s(a: A, n: V).",
        3,
        42,
        "V is aggregated, so it must not be bound outside",
        False,
    ),
    "aggregated variable appears twice": (
        H + "v(a: A, t: T) :- r(a: A), T := sum V : s(a: V, n: V).",
        3,
        36,
        "V must appear exactly once",
        False,
    ),
    "aggregated variable missing": (
        H + "v(a: A, t: T) :- r(a: A), T := max V : s(a: A).",
        3,
        36,
        "V must appear exactly once",
        False,
    ),
    "sum over a string": (
        H + "v(a: A, t: T) :- s(a: A), T := sum V : r(a: A, b: V).",
        3,
        36,
        "sum needs a number; V is string",
        False,
    ),
    "unknown aggregate": (
        H + "v(a: A, t: T) :- r(a: A), T := avg V : s(a: A, n: V).",
        3,
        27,
        "unknown aggregate 'avg'",
        False,
    ),
    "aggregate arity": (
        H + "v(a: A, t: T) :- r(a: A), T := count V : s(a: A, n: V).",
        3,
        27,
        "count takes 0",
        False,
    ),
    "view of unknown relation": (H + "view w().\nv(a: A) :- r(a: A).", 3, 1, "unknown relation 'w'", False),
    "view of unknown attribute": (H + "view v(z).\nv(a: A) :- r(a: A).", 3, 1, "no attribute 'z'", False),
    "view of a source": (H + "view r(a).", 3, 1, "'r' is a source", False),
    "view declared twice": (H + "view v().\nview v(a).\nv(a: A) :- r(a: A).", 4, 1, "declared twice", False),
    "head attributes differ across rules": (
        H + "v(a: A) :- r(a: A).\nv(b: B) :- r(b: B).",
        4,
        1,
        "has attributes (b) here but (a) at line 3",
        False,
    ),
    "rule deriving into a source": (
        H + "r(a: A, b: B) :- r(a: A, b: B).",
        3,
        1,
        "'r' is a source; rules cannot derive",
        False,
    ),
    "source declared twice": (H + "source r(x: int).", 3, 1, "declared twice", False),
    "source attribute declared twice": ("source r(a: int, a: int).", 1, 21, "declared twice", False),
    "unknown type": ("source r(a: integer).", 1, 13, "unknown type 'integer'", False),
    "recursion": (H + "v(a: A) :- w(a: A).\nw(a: A) :- v(a: A).", 3, 1, "recursion (v -> w -> v)", True),
    "self recursion": (H + "v(a: A) :- r(a: A).\nv(a: A) :- v(a: A).", 3, 1, "recursion (v -> v)", True),
    "recursion through an aggregate": (
        H + "v(a: A, n: N) :- r(a: A), N := count : v(a: A).",
        3,
        1,
        "recursion (v -> v)",
        True,
    ),
    "negation": (H + "v(a: A) :- r(a: A), !s(a: A).", 3, 21, "negation is not supported", True),
    "@next": (H + "v(a: A)@next :- r(a: A).", 3, 1, "inductive rule (@next) is not supported", True),
    "content id": (H + "v(a: A) :- r(a: A), C := s(a: A).", 3, 21, "content id", True),
    "transient source": ("transient source t(a: int).\n", 1, 1, "transient source is not supported", True),
    "aggregate result bound by an atom": (
        H + "v(a: A) :- r(a: A), A := count : s(a: A).",
        3,
        21,
        "aggregate result bound elsewhere",
        True,
    ),
    # regressions: these two used to compile and give answers clingo does not give
    "aggregate result bound by another aggregate": (
        H + "v(a: A, n: N) :- r(a: A), N := count : s(a: A), N := count : r(a: A).",
        3,
        49,
        "aggregate result bound elsewhere",
        True,
    ),
    "aggregate result inside its own atom": (
        H + "v(n: N) :- N := count : s(a: N).",
        3,
        12,
        "result used in its own aggregated atom",
        True,
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_is_positioned(name: str) -> None:
    text, line, column, words, unsupported = ERRORS[name]
    with pytest.raises(ProgramError) as info:
        compile_program(text, "prog.pomo")
    err = info.value
    assert len(err.diagnostics) == 1, err.render()  # no cascade of follow-up errors
    (d,) = err.diagnostics
    assert (d.position.line, d.position.column) == (line, column), err.render()
    assert words in d.message, err.render()
    assert err.unsupported is unsupported
    if unsupported:
        assert d.message.endswith("is not supported yet")
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


def test_unsupported_mixed_with_errors_is_marked_unsupported() -> None:
    text = H + "v(a: A) :- r(a: A), !s(a: A).\nw(a: A) :- q(a: A).\n"
    with pytest.raises(ProgramError) as info:
        compile_program(text)
    assert info.value.unsupported
    assert len(info.value.diagnostics) == 2


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
