"""The planner's front door: program text -> a CompiledProgram that builds readers.

Passes, each a function from one IR to the next: parse (text -> AST), validate
(AST -> CheckedProgram, stratification included), lower (CheckedProgram ->
PomoRA Plan), build (PomoRA -> circuit, lazily, at the first lookup of a reader:
3DF's lazy synthesis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Fetch

from . import ra
from .build import CircuitBuilder
from .lower import Plan, lower
from .parse import parse
from .validate import CheckedProgram, Relation, validate

# A user-defined aggregate: the group's distinct argument tuples (sorted) -> a value,
# or None for "no result" (the rule does not fire for that group).
AggregateFunction = Callable[[list[tuple[Any, ...]]], object]


@dataclass
class CompiledProgram:
    checked: CheckedProgram
    plan: Plan
    aggregates: Mapping[str, AggregateFunction] = field(default_factory=dict)

    @property
    def exprs(self) -> dict[str, ra.Expr]:
        return self.plan.exprs

    @property
    def text(self) -> str:
        return self.checked.text

    @property
    def relations(self) -> dict[str, Relation]:
        return self.checked.relations

    @property
    def views(self) -> dict[str, tuple[str, ...]]:
        return self.checked.views

    @property
    def hidden_sources(self) -> dict[str, tuple[str, ...]]:
        """Source-like relations the program's runner must feed: `p@next` -> p's attributes."""
        return self.plan.hidden

    @property
    def inductive(self) -> dict[str, str]:
        """p -> `p@ind`: the relation whose value at epoch t is `p@next` at t+1."""
        return self.plan.inductive

    def source_schema(self, name: str) -> tuple[tuple[str, str], ...]:
        relation = self.relations[name]
        return tuple((a, relation.types[a]) for a in relation.attributes)

    def build_reader(
        self, view: str, key: tuple[str, ...], fetch: Fetch, *, partial: bool = True
    ) -> Circuit:
        """A hydrated circuit answering `view` (a derived or `p@ind` relation) by `key`;
        with `partial=False` every state is full (the fully materialized reference)."""
        builder = CircuitBuilder(
            self.relations,
            self.plan.exprs,
            fetch,
            hidden=self.plan.hidden,
            aggregates=self.aggregates,
            partial=partial,
        )
        return builder.reader(view, key)


def compile_program(
    text: str,
    filename: str = "<program>",
    aggregates: Mapping[str, AggregateFunction] | None = None,
) -> CompiledProgram:
    """Parses, validates and lowers `text`; raises errors.ProgramError on a bad program.

    `aggregates` names the user-defined aggregate functions the program may use."""
    functions = dict(aggregates or {})
    checked = validate(parse(text, filename), text, filename, aggregates=tuple(functions))
    return CompiledProgram(checked, lower(checked), functions)
