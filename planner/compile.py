"""The planner's front door: program text -> a CompiledProgram that builds readers.

Passes, each a function from one IR to the next: parse (text -> AST),
validate (AST -> CheckedProgram), lower (CheckedProgram -> PomoRA), build
(PomoRA -> circuit, lazily, at the first lookup of a reader: 3DF's lazy
synthesis).
"""

from __future__ import annotations

from dataclasses import dataclass

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Fetch

from . import ra
from .build import CircuitBuilder
from .lower import lower
from .parse import parse
from .validate import CheckedProgram, Relation, validate


@dataclass
class CompiledProgram:
    checked: CheckedProgram
    exprs: dict[str, ra.Expr]

    @property
    def text(self) -> str:
        return self.checked.text

    @property
    def relations(self) -> dict[str, Relation]:
        return self.checked.relations

    @property
    def views(self) -> dict[str, tuple[str, ...]]:
        return self.checked.views

    def source_schema(self, name: str) -> tuple[tuple[str, str], ...]:
        relation = self.relations[name]
        return tuple((a, relation.types[a]) for a in relation.attributes)

    def build_reader(self, view: str, key: tuple[str, ...], fetch: Fetch) -> Circuit:
        return CircuitBuilder(self.checked, self.exprs, fetch).reader(view, key)


def compile_program(text: str, filename: str = "<program>") -> CompiledProgram:
    checked = validate(parse(text, filename), text, filename)
    return CompiledProgram(checked, lower(checked))
