"""PomoRA: the relational IR rules lower to (pomo_logic.txt §3).

Columns are named; a rule's columns are its variable names. Every expression
knows its schema, so the circuit builder can trace a key column back to the
columns of its inputs (key provenance).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ast import Constant


@dataclass(frozen=True)
class Col:
    name: str


@dataclass(frozen=True)
class Const:
    value: Constant


Operand = Col | Const


@dataclass(frozen=True)
class Compare:
    left: Operand
    op: str  # == != < <= > >=
    right: Operand


@dataclass(frozen=True)
class Scan:
    """All attributes of a relation (a source, or a derived relation by reference)."""

    relation: str
    schema: tuple[str, ...]


@dataclass(frozen=True)
class Select:
    input: Expr
    predicates: tuple[Compare, ...]

    @property
    def schema(self) -> tuple[str, ...]:
        return self.input.schema


@dataclass(frozen=True)
class Project:
    """Projection, rename and constant columns in one: output name -> operand."""

    input: Expr
    outputs: tuple[tuple[str, Operand], ...]

    @property
    def schema(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)


@dataclass(frozen=True)
class Join:
    """Natural join on the shared column names; a product when none are shared."""

    left: Expr
    right: Expr

    @property
    def on(self) -> tuple[str, ...]:
        return tuple(c for c in self.left.schema if c in self.right.schema)

    @property
    def schema(self) -> tuple[str, ...]:
        return self.left.schema + tuple(c for c in self.right.schema if c not in self.left.schema)


@dataclass(frozen=True)
class Aggregate:
    """Each body row extended with `function` over the atom rows of its group.

    `group` are the columns body and atom share. PomoRA leaves aggregation
    undefined; ours is clingo's: count and sum of an empty group are 0, min and
    max of an empty group yield no row.
    """

    body: Expr
    atom: Expr
    function: str
    value: str | None
    result: str

    @property
    def group(self) -> tuple[str, ...]:
        return tuple(c for c in self.body.schema if c in self.atom.schema)

    @property
    def schema(self) -> tuple[str, ...]:
        return self.body.schema + (self.result,)


@dataclass(frozen=True)
class Union:
    inputs: tuple[Expr, ...]

    @property
    def schema(self) -> tuple[str, ...]:
        return self.inputs[0].schema


@dataclass(frozen=True)
class Distinct:
    input: Expr

    @property
    def schema(self) -> tuple[str, ...]:
        return self.input.schema


@dataclass(frozen=True)
class Unit:
    """One empty tuple: the body of a fact."""

    @property
    def schema(self) -> tuple[str, ...]:
        return ()


Expr = Scan | Select | Project | Join | Aggregate | Union | Distinct | Unit
