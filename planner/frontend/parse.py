"""Pass 1: program text -> AST (lark, LALR), with positioned syntax errors."""

from __future__ import annotations

import re
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

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import Diagnostic, Position, ProgramError, source_lines

GRAMMAR = Path(__file__).with_name("grammar.lark")
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


@cache
def _parser() -> Lark:
    return Lark(GRAMMAR.read_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True)


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|.)", re.DOTALL)
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "r": "\r", "t": "\t", "0": "\0"}


def unescape(body: str) -> str:
    r"""A string literal's value: the escapes are \" \\ \/ \n \r \t \0 \xHH \uHHHH \UHHHHHHHH.

    Any other escape is an error, and so is a surrogate, escaped or not: it is not a
    Unicode character, and could not be encoded later (CIDs, the wire)."""
    if any("\ud800" <= c <= "\udfff" for c in body):
        raise ValueError("a surrogate is not a Unicode character")

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in _SIMPLE:
            return _SIMPLE[code]
        if len(code) > 1:
            value = int(code[1:], 16)
            if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                raise ValueError(f"\\{code} is not a Unicode character")
            return chr(value)
        raise ValueError(f"unknown escape \\{code!s}")

    return _ESCAPE.sub(one, body)


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
        name, *key, order, limit = _kids(tree)
        return ast.ViewDecl(
            str(name),
            tuple(str(k) for k in key if k is not None),
            _pos(tree),
            order or (),
            None if limit is None else int(limit),
            None if limit is None else _pos(limit),
        )

    def view_order(self, tree: Tree) -> tuple[ast.OrderItem, ...]:
        return tuple(_kids(tree))

    def order_item(self, tree: Tree) -> ast.OrderItem:
        name, direction = _kids(tree)
        return ast.OrderItem(str(name), direction is not None and str(direction) == "desc", _pos(name))

    def view_limit(self, tree: Tree) -> Token:
        token: Token = _kids(tree)[0]
        return token

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
        atom, colon = rest[-1], rest[-2]
        args = tuple(ast.Variable(str(v), _pos(v)) for v in rest[:-2])
        return ast.Aggregate(
            ast.Variable(str(result), _pos(result)),
            str(function),
            args,
            atom,
            _pos(tree),
            colon is not None,
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
        return ast.Literal(unescape(str(token)[1:-1]), _pos(token))

    def int(self, tree: Tree) -> ast.Literal:
        token = _kids(tree)[0]
        if len(token) > 20 or not INT_MIN <= int(token) <= INT_MAX:  # DESIGN §2: 64-bit ints
            raise ValueError(f"{token[:20]}{'...' if len(token) > 20 else ''} is not a 64-bit integer")
        return ast.Literal(int(token), _pos(token))

    def float(self, tree: Tree) -> ast.Literal:
        token = _kids(tree)[0]
        return ast.Literal(float(token), _pos(token))


_TERMINALS = {
    "COLON": "':'",
    "TRANSIENT": "'transient'",
    "NEXT": "'@next'",
    "IMPLIES": "':-'",
    "COMPARE": "a comparison",
    "IDENT": "a name",
    "STRING": "a string",
    "SIGNED_INT": "an int",
    "SIGNED_FLOAT": "a float",
    "COMMA": "','",
    "SOURCE": "'source'",
    "LPAR": "'('",
    "RPAR": "')'",
    "DOT": "'.'",
    "VIEW": "'view'",
    "BANG": "'!'",
    "__ANON_0": "':='",
}


def _is_end(err: UnexpectedInput) -> bool:
    return isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END")


def _describe(err: UnexpectedInput) -> str:
    if _is_end(err):
        return "unexpected end of program"
    if isinstance(err, UnexpectedToken):
        expected = sorted({_TERMINALS.get(name, name) for name in err.expected})
        value = err.token.value if len(err.token.value) <= 40 else err.token.value[:40] + "..."
        return f"unexpected {value!r}; expected {' or '.join(expected)}"
    if isinstance(err, UnexpectedCharacters):
        return f"unexpected character {err.char!r}"
    return str(err)


def parse(text: str, filename: str = "<program>") -> ast.Program:
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        line, column = err.line, err.column
        if _is_end(err) or not isinstance(line, int) or line < 1:
            # point just past the last character that is not white space
            lines = source_lines(text.rstrip())
            line, column = len(lines), len(lines[-1]) + 1
        raise ProgramError([Diagnostic(Position(line, column), _describe(err))], text, filename) from None
    try:
        program: ast.Program = _ToAst().transform(tree)
    except VisitError as err:  # e.g. a string literal with a bad escape (lark wraps the error)
        position = _pos(err.obj) if isinstance(err.obj, (Tree, Token)) else Position(1, 1)
        message = f"invalid literal: {err.orig_exc}"
        raise ProgramError([Diagnostic(position, message)], text, filename) from None
    return program
