"""Parsing: valid programs parse to the expected AST; every malformed input is a ProgramError."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.planner.compile import compile_program
from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import Position, ProgramError
from pomoview.planner.frontend.parse import parse

VOTES = (Path(__file__).parents[2] / "examples" / "votes.pomo").read_text()

SPEC_SYNTAX = """\
% every notation of the spec parses (validation refuses some of it later)
source article(id: int, title: string).
transient source clicks(id: int).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
view totals().
articleWithVotes(id: Id, title: T, votes: N) :- article(id: Id, title: T), N := count : vote(article_id: Id).
big(id: Id) :− article(id: Id), S := sum U : vote(article_id: Id, user_id: U), S >= 10.
old(id: Id) ← article(id: Id), !vote(article_id: Id).
seen(id: Id)@next :- clicks(id: Id).
cid(c: C) :- C := article(id: 1).
fact(x: 1, y: -2, z: 1.5, w: "a \\"quoted\\" string", b: true, c: false).
cmp(x: X) :- vote(user_id: X), X != 3, X < 10, X <= 9, X > -1, X >= 0, X == X.
// a C++-style comment
"""


def test_votes_example_parses() -> None:
    program = parse(VOTES, "votes.pomo")
    assert [s.name for s in program.sources] == ["article", "vote"]
    assert [(v.name, v.key) for v in program.views] == [("articleWithVotes", ("id",))]
    (rule,) = program.rules
    assert rule.head.relation == "articleWithVotes"
    assert [a.attribute for a in rule.head.args] == ["id", "title", "votes"]
    atom, agg = rule.body
    assert isinstance(atom, ast.Atom) and atom.relation == "article"
    assert isinstance(agg, ast.Aggregate) and agg.function == "count" and agg.arguments == ()
    assert agg.result.name == "N" and agg.atom.relation == "vote"
    compiled = compile_program(VOTES, "votes.pomo")
    assert compiled.views == {"articleWithVotes": ("id",)}
    assert compiled.source_schema("vote") == (("article_id", "int"), ("user_id", "int"))


def test_spec_notations_parse() -> None:
    program = parse(SPEC_SYNTAX)
    assert [s.transient for s in program.sources] == [False, True, False]
    by_head = {r.head.relation: r for r in program.rules}
    assert isinstance(by_head["old"].body[1], ast.Negation)
    assert by_head["seen"].inductive and not by_head["big"].inductive
    assert isinstance(by_head["cid"].body[0], ast.CidBinding)
    agg = by_head["big"].body[1]
    assert isinstance(agg, ast.Aggregate) and [v.name for v in agg.arguments] == ["U"]
    assert [c.op for c in by_head["cmp"].body[1:]] == ["!=", "<", "<=", ">", ">=", "=="]
    fact = by_head["fact"]
    assert fact.body == ()
    values = {a.attribute: a.term.value for a in fact.head.args}  # type: ignore[union-attr]
    assert values == {"x": 1, "y": -2, "z": 1.5, "w": 'a "quoted" string', "b": True, "c": False}
    assert type(values["x"]) is int and type(values["z"]) is float and type(values["b"]) is bool


def test_positions_are_one_based_line_and_column() -> None:
    program = parse("source r(a: int).\n\n  q(a: X) :-\n    r(a: X).\n")
    rule = program.rules[0]
    assert rule.position == Position(3, 3)
    assert rule.head.args[0].term.position == Position(3, 8)  # type: ignore[union-attr]
    assert rule.body[0].position == Position(4, 5)
    assert program.sources[0].attributes[0][2] == Position(1, 13)


def test_int_constant_before_the_final_period_is_an_int() -> None:
    """Regression: `A == 1.` used to lex `1.` as a float and swallow the rule's period."""
    text = "source r(a: int).\nq(a: A) :- r(a: A), A == 1.\nq(a: A) :- r(a: A), A > -1.\nview q().\n"
    program = parse(text)
    constants = [rule.body[1].right for rule in program.rules]  # type: ignore[union-attr]
    assert [(c.value, type(c.value)) for c in constants] == [(1, int), (-1, int)]
    assert parse("q(x: 1.5).").rules[0].head.args[0].term.value == 1.5  # type: ignore[union-attr]
    assert parse("q(x: .5).").rules[0].head.args[0].term.value == 0.5  # type: ignore[union-attr]
    assert parse("q(x: 2e3).").rules[0].head.args[0].term.value == 2000.0  # type: ignore[union-attr]
    compile_program(text)


def test_bad_string_escape_is_a_positioned_error() -> None:
    """Regression: a bad escape in a string used to escape as lark's VisitError."""
    text = 'source r(a: string).\nq(a: A) :- r(a: A), A == "\\x".\n'
    with pytest.raises(ProgramError) as info:
        parse(text, "esc.pomo")
    (d,) = info.value.diagnostics
    assert d.position == Position(2, 26)
    assert info.value.render().startswith("esc.pomo:2:26: error: ")


SYNTAX_ERRORS = [
    # (text, line, column, words in the message)
    ("source r(a: int).\nq(a: A) :- r(a: A) r(a: A).\n", 2, 20, "unexpected 'r'"),
    ("source r(a: int).\nq(a: A) :- r(a A).\n", 2, 16, "unexpected 'A'"),
    ("source r(a int).\n", 1, 12, "unexpected 'int'"),
    ("view v(a.\n", 1, 9, "unexpected '.'"),
    ("source r(a: int).\nq(a: A) :- r(a: A), A =< 1.\n", 2, 23, "unexpected character '='"),
    ("source r(a: int).\n\n\n   q(a: A) :- r(a: A), # .\n", 4, 24, "unexpected character '#'"),
    ("q(a: 1) :- .\n", 1, 12, "unexpected '.'"),
    ('q(a: "never closed).\n', 1, 6, "unexpected character '\"'"),
    ("é(a: 1).\n", 1, 1, "unexpected character 'é'"),
    ("q(a: 1).\nr(b: 2) r(b: 3).\n", 2, 9, "unexpected 'r'"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), SYNTAX_ERRORS)
def test_syntax_errors_are_positioned(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(ProgramError) as info:
        parse(text, "bad.pomo")
    err = info.value
    assert not err.unsupported
    (d,) = err.diagnostics
    assert (d.position.line, d.position.column) == (line, column), err.render()
    assert message in d.message
    rendered = err.render().splitlines()
    assert rendered[0].startswith(f"bad.pomo:{line}:{column}: error: ")
    assert rendered[1] == "    " + text.splitlines()[line - 1]
    assert rendered[2] == "    " + " " * (column - 1) + "^"
    assert str(err) == err.render()


@pytest.mark.parametrize(
    "text", ["source r(a: int", "source r(a: int).\nq(a: A) :- r(a: A)", "view v(", "q(a:"]
)
def test_truncated_program_is_end_of_program_on_last_line(text: str) -> None:
    with pytest.raises(ProgramError) as info:
        parse(text, "cut.pomo")
    (d,) = info.value.diagnostics
    assert d.message == "unexpected end of program"
    assert d.position.line == len(text.splitlines())
    assert 1 <= d.position.column <= len(text.splitlines()[-1]) + 1
    assert "^" in info.value.render()


def test_every_prefix_of_a_program_is_a_program_or_a_program_error() -> None:
    text = SPEC_SYNTAX + VOTES
    for end in range(len(text) + 1):
        try:
            parse(text[:end])
        except ProgramError as err:
            assert err.diagnostics and err.render()


def test_huge_line_and_huge_program() -> None:
    line = "x" * 100_000
    with pytest.raises(ProgramError) as info:
        parse(line)
    assert info.value.diagnostics[0].position.line == 1
    many = "source r(a: int).\n" + "".join(f"q{i}(a: A) :- r(a: A), A > {i}.\n" for i in range(2000))
    assert len(parse(many).rules) == 2000
    long_string = 'q(a: "' + "y" * 100_000 + '").'
    assert parse(long_string).rules[0].head.args[0].term.value == "y" * 100_000  # type: ignore[union-attr]
    long_ident = "q(" + "a" * 100_000 + ": 1)."
    assert parse(long_ident).rules[0].head.args[0].attribute == "a" * 100_000


def test_unicode_in_strings_and_comments_is_fine() -> None:
    program = parse('% ünïcödé comment ✓\nq(a: "日本語 ✓ \\u00e9").\n')
    assert program.rules[0].head.args[0].term.value == "日本語 ✓ é"  # type: ignore[union-attr]
    for bad in ["q(a: 1).\u00a0", "q(ä: 1).", "q(a: 1)\u2024", "\x00", "q(a: 1).\ufeff"]:
        with pytest.raises(ProgramError):
            parse(bad)


TOKENS = [
    "source",
    "view",
    "transient",
    "r",
    "q",
    "(",
    ")",
    ",",
    ".",
    ":",
    ":-",
    ":−",
    "←",
    ":=",
    "a",
    "A",
    "N",
    "int",
    "string",
    "count",
    "sum",
    "1",
    "-2",
    "1.5",
    '"s"',
    '"\\q"',
    "<",
    "==",
    "!",
    "@next",
    "true",
    "\n",
    "%c\n",
    "é",
    "\\",
    "'",
    "\x00",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30).map(" ".join))
def test_token_soup_never_crashes(text: str) -> None:
    try:
        compile_program(text)
    except ProgramError as err:
        assert err.render()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_never_crashes(text: str) -> None:
    try:
        compile_program(text)
    except ProgramError as err:
        assert err.render()


def test_aggregate_forms() -> None:
    """Built-in and user-defined aggregates take any number of variables; the colon before
    the atom may be missing (the spec's own §2.5.3 typo), which validation then reports."""
    text = (
        "q(m: M) :- M := median A B : r(a: A, b: B), N := count : r(), "
        "S := sum V r(v: V), C := r(a: 1)."
    )
    median, count, total, content = parse(text).rules[0].body
    assert isinstance(median, ast.Aggregate) and median.function == "median"
    assert [v.name for v in median.arguments] == ["A", "B"] and median.colon
    assert isinstance(count, ast.Aggregate) and count.arguments == () and count.colon
    assert isinstance(total, ast.Aggregate) and not total.colon and total.atom.relation == "r"
    assert isinstance(content, ast.CidBinding) and content.variable.name == "C"


def test_syntax_error_names_what_was_expected() -> None:
    with pytest.raises(ProgramError) as info:
        parse("q(a: 1) r")
    assert info.value.diagnostics[0].message == "unexpected 'r'; expected ',' or '.' or ':-' or '@next'"
