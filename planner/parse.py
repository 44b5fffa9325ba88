"""Pass 1: program text -> AST (lark, LALR), with positioned syntax errors."""

from __future__ import annotations

import ast as pyast
from functools import cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from . import ast
from .errors import Diagnostic, Position, ProgramError

GRAMMAR = Path(__file__).with_name("grammar.lark")


@cache
def _parser() -> Lark:
    return Lark(
        GRAMMAR.read_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True
    )


def _pos(item: Tree | Token) -> Position:
    if isinstance(item, Token):
        return Position(item.line or 0, item.column or 0)
    return Position(item.meta.line, item.meta.column)


def _kids(tree: Tree) -> list[Any]:
    # lark types children as Tree | Token, but after a bottom-up transform they are AST nodes.
    return list(tree.children)


@v_args(tree=True)
class _ToAst(Transformer):  # type: ignore[type-arg]
    def start(self, tree: Tree) -> ast.Program:
        program = ast.Program()
        for item in _kids(tree):
            if isinstance(item, ast.SourceDecl):
                program.sources.append(item)
            elif isinstance(item, ast.ViewDecl):
                program.views.append(item)
            elif isinstance(item, ast.Rule):
                program.rules.append(item)
        return program

    def source_decl(self, tree: Tree) -> ast.SourceDecl:
        transient, name, *attrs = _kids(tree)
        attributes = tuple(a for a in attrs if a is not None)
        return ast.SourceDecl(str(name), attributes, transient is not None, _pos(tree))

    def typed_attr(self, tree: Tree) -> tuple[str, str, Position]:
        name, type_ = _kids(tree)
        return (str(name), str(type_), _pos(type_))

    def view_decl(self, tree: Tree) -> ast.ViewDecl:
        name, *key = _kids(tree)
        return ast.ViewDecl(str(name), tuple(str(k) for k in key if k is not None), _pos(tree))

    def rule(self, tree: Tree) -> ast.Rule:
        head, next_, _implies, body = _kids(tree)
        return ast.Rule(head, next_ is not None, body or (), _pos(tree))

    def body(self, tree: Tree) -> tuple[ast.BodyLiteral, ...]:
        return tuple(_kids(tree))

    def negation(self, tree: Tree) -> ast.Negation:
        return ast.Negation(_kids(tree)[0], _pos(tree))

    def cid_binding(self, tree: Tree) -> ast.CidBinding:
        var, atom = _kids(tree)
        return ast.CidBinding(ast.Variable(str(var), _pos(var)), atom, _pos(tree))

    def aggregate(self, tree: Tree) -> ast.Aggregate:
        result, function, *rest = _kids(tree)
        atom = rest[-1]
        args = tuple(ast.Variable(str(v), _pos(v)) for v in rest[:-1])
        return ast.Aggregate(
            ast.Variable(str(result), _pos(result)), str(function), args, atom, _pos(tree)
        )

    def constraint(self, tree: Tree) -> ast.Constraint:
        left, op, right = _kids(tree)
        return ast.Constraint(left, str(op), right, _pos(tree))

    def atom(self, tree: Tree) -> ast.Atom:
        name, *args = _kids(tree)
        return ast.Atom(str(name), tuple(a for a in args if a is not None), _pos(tree))

    def arg(self, tree: Tree) -> ast.Arg:
        name, term = _kids(tree)
        return ast.Arg(str(name), term, _pos(tree))

    def variable(self, tree: Tree) -> ast.Term:
        token = _kids(tree)[0]
        if token in ("true", "false"):
            return ast.Literal(token == "true", _pos(token))
        return ast.Variable(str(token), _pos(token))

    def string(self, tree: Tree) -> ast.Literal:
        token = _kids(tree)[0]
        return ast.Literal(pyast.literal_eval(str(token)), _pos(token))

    def int(self, tree: Tree) -> ast.Literal:
        token = _kids(tree)[0]
        return ast.Literal(int(token), _pos(token))

    def float(self, tree: Tree) -> ast.Literal:
        token = _kids(tree)[0]
        return ast.Literal(float(token), _pos(token))


def _describe(err: UnexpectedInput) -> str:
    if isinstance(err, UnexpectedToken):
        if err.token.type == "$END":
            return "unexpected end of program"
        expected = sorted(err.expected)[:6]
        return f"unexpected {err.token.value!r}; expected one of {', '.join(expected)}"
    if isinstance(err, UnexpectedCharacters):
        return f"unexpected character {err.char!r}"
    if isinstance(err, UnexpectedEOF):
        return "unexpected end of program"
    return str(err)


def parse(text: str, filename: str = "<program>") -> ast.Program:
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        line, column = err.line, err.column
        if not isinstance(line, int) or line < 1:  # end of input: point past the last character
            lines = text.splitlines() or [""]
            line, column = len(lines), len(lines[-1]) + 1
        raise ProgramError(
            [Diagnostic(Position(line, column), _describe(err))], text, filename
        ) from None
    try:
        program: ast.Program = _ToAst().transform(tree)
    except VisitError as err:  # e.g. a string literal with a bad escape (lark wraps the error)
        position = _pos(err.obj) if isinstance(err.obj, (Tree, Token)) else Position(1, 1)
        message = f"invalid literal: {err.orig_exc}"
        raise ProgramError([Diagnostic(position, message)], text, filename) from None
    return program
