"""PomoRA: the relational IR rules lower to (pomo_logic.txt §3).

Columns are named; a rule's columns are its variable names. Every expression
knows its schema, so the circuit builder can trace a key column back to the
columns of its inputs (key provenance). Relations are sets, but intermediate
expressions may carry multiplicities (a projection of a set is a bag): every
derived relation ends in a Distinct, and the operators whose result depends on
multiplicities say how they treat them (AntiJoin, Aggregate).

The operators: Scan (a relation), Recur (a relation of the enclosing recursive
stratum), CidExtend, Select, Project (projection, rename and constant columns),
Join (natural join; a product when no column is shared), SemiJoin, AntiJoin,
Difference, Aggregate, Union, Distinct, Unit, and for a recursive stratum
Fixpoint (the stratum's loop) with Recursive (one of its relations). MultiJoin (the
n-way join of a cyclic rule body) is not made by lowering: the pass cyclic.py puts it in
place of a chain of Joins.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pomoview.planner.frontend.ast import Constant

CID_COLUMN = "$CID"


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
    """All attributes of a relation: a source, a hidden `p@next` relation, or a derived
    relation by reference (the builder builds its expression in place)."""

    relation: str
    schema: tuple[str, ...]


@dataclass(frozen=True)
class Recur:
    """Inside a Fixpoint's bodies: the current value of one of the fixpoint's relations."""

    relation: str
    schema: tuple[str, ...]


@dataclass(frozen=True)
class CidExtend:
    """Each row of `input` (a Scan or Recur, so every attribute is there) extended with the
    column `$CID`: the tuple's content id, computed from `relation` and all its attributes."""

    input: Scan | Recur

    @property
    def relation(self) -> str:
        return self.input.relation

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.input.schema + (CID_COLUMN,)


@dataclass(frozen=True)
class Select:
    input: Expr
    predicates: tuple[Compare, ...]

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.input.schema


@dataclass(frozen=True)
class Project:
    """Projection, rename and constant columns in one: output name -> operand."""

    input: Expr
    outputs: tuple[tuple[str, Operand], ...]

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.outputs)


@dataclass(frozen=True)
class Join:
    """Natural join on the shared column names; a product when none are shared.
    The weight of an output row is the product of its two rows' weights."""

    left: Expr
    right: Expr

    @cached_property
    def on(self) -> tuple[str, ...]:
        return tuple(c for c in self.left.schema if c in self.right.schema)

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.left.schema + tuple(c for c in self.right.schema if c not in self.left.schema)


@dataclass(frozen=True)
class SemiJoin:
    """The rows of `left` that match a row of `right`, whose columns are all `left`'s.

    A join that adds no column: a row's weight is multiplied by its matches' (a bag;
    the Distinct above makes it a set again)."""

    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        assert set(self.right.schema) <= set(self.left.schema), (self.left.schema, self.right.schema)

    @cached_property
    def on(self) -> tuple[str, ...]:
        return self.right.schema

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.left.schema


@dataclass(frozen=True)
class AntiJoin:
    """The rows of `left` that match NO row of `right` (whose columns are all `left`'s).

    `left` rows keep their weights; `right` is read as a set (a key matches when its
    total weight is positive), so a bag on the right does not change the answer."""

    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        assert set(self.right.schema) <= set(self.left.schema), (self.left.schema, self.right.schema)

    @cached_property
    def on(self) -> tuple[str, ...]:
        return self.right.schema

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.left.schema


@dataclass(frozen=True)
class Difference:
    """`left` less `right`, weight by weight (both of one schema, in the same column order)."""

    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        assert self.left.schema == self.right.schema, (self.left.schema, self.right.schema)

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.left.schema


AtomTerm = str | Const  # a column of a MultiJoin's atom: a variable's name, or a constant


@dataclass(frozen=True)
class MultiJoin:
    """The natural join of a rule body's atoms in one operator, with comparisons as its
    constraints (built as a WcojJoin, dataflow/operators/wcoj.py; made by cyclic.py).

    Atom i is `atoms[i] = (input, terms)`: one term per column of `input`, a variable
    (distinct within the atom) or a constant the column must equal. An input read by
    several atoms is one object, so that the operator indexes it once. `constraints`
    compare a variable (always on the left) with a variable or a constant. The output has
    a column per variable, in the order of `variables`; its weight is the product of the
    atoms' rows' weights, as for a chain of Joins. `negated` atoms, each over variables
    of `atoms`, drop the rows whose tuple they hold, as AntiJoins above it would."""

    atoms: tuple[tuple[Expr, tuple[AtomTerm, ...]], ...]
    variables: tuple[str, ...]
    constraints: tuple[Compare, ...] = ()
    negated: tuple[tuple[Expr, tuple[AtomTerm, ...]], ...] = ()

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.variables


@dataclass(frozen=True)
class Aggregate:
    """Each body row extended with `function` over the atom rows of its group.

    PomoRA leaves aggregation undefined; ours is clingo's. `group` are the columns
    body and atom share, and the atom has exactly the group columns and the
    aggregated `values` (its local variables are projected away, so an atom row is
    counted once per distinct tuple of the relation that matches it):

    - count: the number of matching tuples (`values` is empty); sum: the sum of the
      value over them; min, max: the least/greatest value;
    - a user-defined aggregate: its function of the group's distinct `values` tuples
      (sorted), which returns a value or None for "no result";
    - an empty group: count and sum give 0, min and max no result (the body row is
      dropped), a user-defined aggregate whatever its function gives for [].
    """

    body: Expr
    atom: Expr
    function: str
    values: tuple[str, ...]
    result: str

    @cached_property
    def group(self) -> tuple[str, ...]:
        return tuple(c for c in self.body.schema if c in self.atom.schema)

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.body.schema + (self.result,)


@dataclass(frozen=True)
class Union:
    """The sum of the inputs (same column order)."""

    inputs: tuple[Expr, ...]

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.inputs[0].schema


@dataclass(frozen=True)
class Distinct:
    input: Expr

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.input.schema


@dataclass(frozen=True)
class Unit:
    """One empty tuple: the body of a fact."""

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Fixpoint:
    """A recursive stratum (pomo_logic §3: its assignments wrapped in a loop).

    `bodies[i]` computes `relations[i]` from the stratum's relations (read through
    Recur) and lower strata; the fixpoint is the least one reached by iterating all
    bodies from empty relations. Compared by identity: one stratum, one loop.
    """

    relations: tuple[str, ...]
    bodies: tuple[Expr, ...]

    def schema_of(self, relation: str) -> tuple[str, ...]:
        return self.bodies[self.relations.index(relation)].schema


@dataclass(frozen=True)
class Recursive:
    """The fixed point's value of one relation of a Fixpoint."""

    fixpoint: Fixpoint
    relation: str

    @cached_property
    def schema(self) -> tuple[str, ...]:
        return self.fixpoint.schema_of(self.relation)


Expr = (
    Scan
    | Recur
    | CidExtend
    | Select
    | Project
    | Join
    | MultiJoin
    | SemiJoin
    | AntiJoin
    | Difference
    | Aggregate
    | Union
    | Distinct
    | Unit
    | Recursive
)


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of `expr` (a Recursive's fixpoint is not one: it is shared)."""
    if isinstance(expr, (Select, Project, Distinct)):
        return (expr.input,)
    if isinstance(expr, CidExtend):
        return (expr.input,)
    if isinstance(expr, (Join, SemiJoin, AntiJoin, Difference)):
        return (expr.left, expr.right)
    if isinstance(expr, Aggregate):
        return (expr.body, expr.atom)
    if isinstance(expr, Union):
        return expr.inputs
    if isinstance(expr, MultiJoin):
        return tuple({id(e): e for e, _ in expr.atoms + expr.negated}.values())  # read twice: once
    return ()


def mentions_recur(expr: Expr, memo: dict[int, bool] | None = None) -> bool:
    """Whether `expr` reads a relation of its enclosing fixpoint (a Recur). Iterative (a
    body can be a thousand operators deep) and memoized by object in `memo` (id -> answer;
    one call's own when None), which a caller walking many expressions of one program
    keeps: a sub-expression shared by several is walked once."""
    seen: dict[int, bool] = {} if memo is None else memo
    stack = [expr]
    while stack:
        top = stack[-1]
        if id(top) in seen:
            stack.pop()
            continue
        below = [c for c in children(top) if id(c) not in seen]
        if below:
            stack.extend(below)
            continue
        stack.pop()
        seen[id(top)] = isinstance(top, Recur) or any(seen[id(c)] for c in children(top))
    return seen[id(expr)]
