"""The relations of a program as declared: sources with their types, derived relations with
their rules, gathered from the rule heads (the first checks of validate.py, on names and
attributes). `Relation` and `CheckedProgram` are the pass's result."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pomoview.planner.frontend import ast, builtins
from pomoview.planner.frontend.errors import ErrorSink, Position
from pomoview.planner.frontend.stratify import Stratum
from pomoview.planner.frontend.values import TYPES


@dataclass
class Relation:
    name: str
    attributes: list[str]
    types: dict[str, str]
    kind: str  # "source" | "derived" | "builtin" (a source the server fills: builtins.py)
    position: Position
    rules: list[ast.Rule] = field(default_factory=list)  # deductive and inductive
    transient: bool = False  # a `transient source`: tuples live for one epoch


@dataclass(frozen=True)
class ViewOrder:
    """A view's `order by ... limit N`: each key's rows sorted by `by` (attribute, descending),
    ties broken by the whole row, and only the first `limit` of them (None: all)."""

    by: tuple[tuple[str, bool], ...]
    limit: int | None


@dataclass
class CheckedProgram:
    text: str
    relations: dict[str, Relation]
    views: dict[str, tuple[str, ...]]
    order: list[str]  # derived relations, dependencies first (= the strata, flattened)
    strata: list[Stratum] = field(default_factory=list)
    user_aggregates: frozenset[str] = frozenset()
    # The views declared with `order by`, by name.
    view_orders: dict[str, ViewOrder] = field(default_factory=dict)

    @property
    def sources(self) -> dict[str, Relation]:
        return {n: r for n, r in self.relations.items() if r.kind == "source"}


def check_sources(program: ast.Program, errors: ErrorSink) -> dict[str, Relation]:
    relations: dict[str, Relation] = {}
    for name, schema in builtins.used_builtins(program, errors).items():
        relations[name] = Relation(name, [a for a, _ in schema], dict(schema), "builtin", builtins.POSITION)
    for decl in program.sources:
        if decl.name in builtins.BUILTIN_SOURCES:
            continue  # an error of its own (builtins.used_builtins)
        if decl.name in relations:
            errors.error(decl.position, f"source {decl.name!r} is declared twice")
            continue
        types: dict[str, str] = {}
        for name, type_, pos in decl.attributes:
            if name in types:
                errors.error(pos, f"attribute {name!r} of {decl.name!r} is declared twice")
            if type_ not in TYPES:
                errors.error(pos, f"unknown type {type_!r}; expected one of {', '.join(TYPES)}")
            types[name] = type_
        relations[decl.name] = Relation(
            decl.name, list(types), types, "source", decl.position, transient=decl.transient
        )
    return relations


def _order_aggregates(rule: ast.Rule) -> ast.Rule:
    """The rule with its aggregates reordered so that one grouped by another's result comes
    after it (pomo_logic §2.4: predicates may be reordered, and an aggregate waits until the
    bindings it shares with the body are grounded). Other literals keep their places, and
    so does every aggregate when there is nothing to reorder or the results form a cycle
    (which the checks then report)."""
    aggs = [lit for lit in rule.body if isinstance(lit, ast.Aggregate)]
    if len(aggs) < 2:
        return rule
    bound: set[str] = set()
    for lit in rule.body:
        if isinstance(lit, ast.Atom):
            bound |= {v.name for v in variables(lit)}
        elif isinstance(lit, ast.CidBinding):
            bound |= {v.name for v in variables(lit.atom)} | {lit.variable.name}
    producer = {a.result.name: i for i, a in enumerate(aggs) if a.result.name not in bound}
    needs = [
        {producer[v.name] for v in variables(a.atom) if v.name in producer and producer[v.name] != i}
        for i, a in enumerate(aggs)
    ]
    order: list[int] = []
    placed: set[int] = set()
    while len(order) < len(aggs):
        ready = [i for i in range(len(aggs)) if i not in placed and needs[i] <= placed]
        if not ready:
            return rule  # a cycle of results: left for the checks to report
        order.append(ready[0])
        placed.add(ready[0])
    if order == list(range(len(aggs))):
        return rule
    queue = iter([aggs[i] for i in order])
    body = tuple(next(queue) if isinstance(lit, ast.Aggregate) else lit for lit in rule.body)
    return replace(rule, body=body)


def collect_heads(program: ast.Program, relations: dict[str, Relation], errors: ErrorSink) -> None:
    for rule in map(_order_aggregates, program.rules):
        head = rule.head
        existing = relations.get(head.relation)
        if head.relation in builtins.BUILTIN_SOURCES:
            errors.error(head.position, builtins.read_only(head.relation) + "; rules cannot derive into it")
            continue
        if existing is not None and existing.kind == "source":
            errors.error(head.position, f"{head.relation!r} is a source; rules cannot derive into it")
            continue
        attrs: list[str] = []
        for arg in head.args:
            if arg.attribute in attrs:
                errors.error(arg.position, f"attribute {arg.attribute!r} appears twice in the head")
            else:
                attrs.append(arg.attribute)
        if existing is None:
            relations[head.relation] = Relation(head.relation, attrs, {}, "derived", head.position, [rule])
        elif set(existing.attributes) != set(attrs):
            errors.error(
                head.position,
                f"{head.relation!r} has attributes ({', '.join(attrs)}) here but "
                f"({', '.join(existing.attributes)}) at line {existing.position.line}",
            )
        else:
            existing.rules.append(rule)


def variables(atom: ast.Atom) -> list[ast.Variable]:
    return [arg.term for arg in atom.args if isinstance(arg.term, ast.Variable)]
