"""The PomoLogic AST. Every node keeps the position it was parsed at."""

from __future__ import annotations

from dataclasses import dataclass, field

from pomoview.planner.frontend.errors import Position

Constant = int | float | str | bool


@dataclass(frozen=True)
class Variable:
    name: str
    position: Position


@dataclass(frozen=True)
class Literal:
    value: Constant
    position: Position


Term = Variable | Literal


@dataclass(frozen=True)
class Arg:
    attribute: str
    term: Term
    position: Position


@dataclass(frozen=True)
class Atom:
    relation: str
    args: tuple[Arg, ...]
    position: Position


@dataclass(frozen=True)
class Negation:
    atom: Atom
    position: Position


@dataclass(frozen=True)
class CidBinding:
    variable: Variable
    atom: Atom
    position: Position


@dataclass(frozen=True)
class Aggregate:
    result: Variable
    function: str
    arguments: tuple[Variable, ...]
    atom: Atom
    position: Position
    colon: bool = True  # False for the spec's `X := sum V atom` (a positioned error)


@dataclass(frozen=True)
class Constraint:
    left: Term
    op: str
    right: Term
    position: Position


BodyLiteral = Atom | Negation | CidBinding | Aggregate | Constraint


@dataclass(frozen=True)
class Rule:
    head: Atom
    inductive: bool
    body: tuple[BodyLiteral, ...]
    position: Position


@dataclass(frozen=True)
class SourceDecl:
    name: str
    attributes: tuple[tuple[str, str, Position], ...]
    transient: bool
    position: Position


@dataclass(frozen=True)
class OrderItem:
    attribute: str
    descending: bool
    position: Position


@dataclass(frozen=True)
class ViewDecl:
    name: str
    key: tuple[str, ...]
    position: Position
    # `order by ...`: each key's rows in this order; `limit N`: only the first N of them.
    order: tuple[OrderItem, ...] = ()
    limit: int | None = None
    limit_position: Position | None = None


@dataclass
class Program:
    sources: list[SourceDecl] = field(default_factory=list)
    views: list[ViewDecl] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
