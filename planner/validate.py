"""Pass 2: AST -> CheckedProgram: names, attributes, range restriction, types.

Every problem is reported with its position; all problems of a program are
collected before the pass fails. Features this build does not run yet
(recursion, negation, `@next`, content ids, transient sources) are refused as
unsupported, with their position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ast
from .errors import ErrorSink, Position

TYPES = ("int", "float", "string", "bool", "bytes")
AGGREGATES = {"count": 0, "sum": 1, "min": 1, "max": 1}
NUMERIC = ("int", "float")


@dataclass
class Relation:
    name: str
    attributes: list[str]
    types: dict[str, str]
    kind: str  # "source" | "derived"
    position: Position
    rules: list[ast.Rule] = field(default_factory=list)


@dataclass
class CheckedProgram:
    text: str
    relations: dict[str, Relation]
    views: dict[str, tuple[str, ...]]
    order: list[str]  # derived relations, dependencies first

    @property
    def sources(self) -> dict[str, Relation]:
        return {n: r for n, r in self.relations.items() if r.kind == "source"}


def _literal_type(value: ast.Constant) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "string"


def _unify(types: dict[str, str], name: str, type_: str) -> str | None:
    """Records `name: type_` unless `name` already has another type, which it returns."""
    known = types.setdefault(name, type_)
    return known if known != type_ else None


def _compatible(a: str, b: str) -> bool:
    return a == b or (a in NUMERIC and b in NUMERIC)


def _check_sources(program: ast.Program, errors: ErrorSink) -> dict[str, Relation]:
    relations: dict[str, Relation] = {}
    for decl in program.sources:
        if decl.name in relations:
            errors.error(decl.position, f"source {decl.name!r} is declared twice")
            continue
        if decl.transient:
            errors.unsupported_feature(decl.position, "a transient source")
        types: dict[str, str] = {}
        for name, type_, pos in decl.attributes:
            if name in types:
                errors.error(pos, f"attribute {name!r} of {decl.name!r} is declared twice")
            if type_ not in TYPES:
                errors.error(pos, f"unknown type {type_!r}; expected one of {', '.join(TYPES)}")
            types[name] = type_
        relations[decl.name] = Relation(decl.name, list(types), types, "source", decl.position)
    return relations


def _collect_heads(program: ast.Program, relations: dict[str, Relation], errors: ErrorSink) -> None:
    for rule in program.rules:
        head = rule.head
        if rule.inductive:
            errors.unsupported_feature(rule.position, "an inductive rule (@next)")
        existing = relations.get(head.relation)
        if existing is not None and existing.kind == "source":
            errors.error(
                head.position, f"{head.relation!r} is a source; rules cannot derive into it"
            )
            continue
        attrs: list[str] = []
        for arg in head.args:
            if arg.attribute in attrs:
                errors.error(arg.position, f"attribute {arg.attribute!r} appears twice in the head")
            attrs.append(arg.attribute)
        if existing is None:
            relations[head.relation] = Relation(
                head.relation, attrs, {}, "derived", head.position, [rule]
            )
        elif set(existing.attributes) != set(attrs):
            errors.error(
                head.position,
                f"{head.relation!r} has attributes ({', '.join(attrs)}) here but "
                f"({', '.join(existing.attributes)}) at line {existing.position.line}",
            )
        else:
            existing.rules.append(rule)


def _body_atoms(rule: ast.Rule) -> list[ast.Atom]:
    atoms: list[ast.Atom] = []
    for lit in rule.body:
        if isinstance(lit, ast.Atom):
            atoms.append(lit)
        elif isinstance(lit, (ast.Negation, ast.CidBinding, ast.Aggregate)):
            atoms.append(lit.atom)
    return atoms


def _dependency_order(relations: dict[str, Relation], errors: ErrorSink) -> list[str]:
    derived = {n: r for n, r in relations.items() if r.kind == "derived"}
    deps = {
        n: {a.relation for rule in r.rules for a in _body_atoms(rule) if a.relation in derived}
        for n, r in derived.items()
    }
    order: list[str] = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = path[path.index(name) :] + [name]
            errors.unsupported_feature(derived[name].position, f"recursion ({' -> '.join(cycle)})")
            return
        state[name] = 1
        for dep in sorted(deps[name]):
            visit(dep, path + [name])
        state[name] = 2
        order.append(name)

    for name in derived:
        visit(name, [])
    return order


class _RuleChecker:
    """Checks one rule's scoping and types; fills the head relation's types."""

    def __init__(self, rule: ast.Rule, relations: dict[str, Relation], errors: ErrorSink) -> None:
        self.rule = rule
        self.relations = relations
        self.errors = errors
        self.types: dict[str, str] = {}

    def bind(self, var: ast.Variable, type_: str | None) -> None:
        if type_ is None:
            return
        known = _unify(self.types, var.name, type_)
        if known is not None:
            self.errors.error(
                var.position, f"type clash: {var.name} is {known} elsewhere but {type_} here"
            )

    def atom_attrs(self, atom: ast.Atom) -> dict[str, str | None] | None:
        relation = self.relations.get(atom.relation)
        if relation is None:
            self.errors.error(atom.position, f"unknown relation {atom.relation!r}")
            return None
        out: dict[str, str | None] = {}
        for arg in atom.args:
            if arg.attribute not in relation.attributes:
                self.errors.error(
                    arg.position,
                    f"{atom.relation!r} has no attribute {arg.attribute!r} "
                    f"(it has {', '.join(relation.attributes) or 'none'})",
                )
                continue
            if arg.attribute in out:
                self.errors.error(arg.position, f"attribute {arg.attribute!r} appears twice")
            out[arg.attribute] = relation.types.get(arg.attribute)
        return out

    def check_atom(self, atom: ast.Atom, bind: bool) -> set[str]:
        attrs = self.atom_attrs(atom)
        names: set[str] = set()
        if attrs is None:  # unknown relation (reported): its variables still count as bound
            return {arg.term.name for arg in atom.args if isinstance(arg.term, ast.Variable)}
        for arg in atom.args:
            type_ = attrs.get(arg.attribute)
            if isinstance(arg.term, ast.Literal):
                lit = _literal_type(arg.term.value)
                if type_ is not None and not _compatible(lit, type_):
                    self.errors.error(
                        arg.term.position,
                        f"type clash: {atom.relation}.{arg.attribute} is {type_}, "
                        f"the constant is {lit}",
                    )
            else:
                names.add(arg.term.name)
                if bind:
                    self.bind(arg.term, type_)
        return names

    def check(self) -> None:
        rule = self.rule
        bound: set[str] = set()
        for lit in rule.body:
            if isinstance(lit, ast.Atom):
                bound |= self.check_atom(lit, bind=True)
            elif isinstance(lit, ast.Negation):
                self.errors.unsupported_feature(lit.position, "negation")
            elif isinstance(lit, ast.CidBinding):
                self.errors.unsupported_feature(lit.position, "a content id binding")
        outer = set(bound)
        for lit in rule.body:
            if isinstance(lit, ast.Aggregate):
                name = lit.result.name
                if name in bound - outer:  # bound by an earlier aggregate (outer: see below)
                    self.errors.unsupported_feature(
                        lit.result.position, "an aggregate result bound elsewhere in the body"
                    )
                elif name not in outer and any(
                    isinstance(a.term, ast.Variable) and a.term.name == name for a in lit.atom.args
                ):
                    self.errors.unsupported_feature(
                        lit.result.position, "an aggregate result used in its own aggregated atom"
                    )
                self.check_aggregate(lit, outer)
                bound.add(lit.result.name)
        for lit in rule.body:
            if isinstance(lit, ast.Constraint):
                self.check_constraint(lit, bound)
        self.check_head(bound)

    def check_aggregate(self, agg: ast.Aggregate, outer: set[str]) -> None:
        arity = AGGREGATES.get(agg.function)
        if arity is None:
            self.errors.error(
                agg.position,
                f"unknown aggregate {agg.function!r}; expected one of {', '.join(AGGREGATES)}",
            )
            return
        if len(agg.arguments) != arity:
            self.errors.error(agg.position, f"{agg.function} takes {arity} variable(s)")
            return
        if agg.result.name in outer:
            self.errors.unsupported_feature(
                agg.result.position, "an aggregate result bound elsewhere in the body"
            )
        attrs = self.atom_attrs(agg.atom) or {}
        occurrences: dict[str, int] = {}
        for arg in agg.atom.args:
            if isinstance(arg.term, ast.Variable):
                occurrences[arg.term.name] = occurrences.get(arg.term.name, 0) + 1
                if arg.term.name in outer:
                    self.bind(arg.term, attrs.get(arg.attribute))
        self.check_atom(agg.atom, bind=False)
        result_type = "int"
        for var in agg.arguments:
            if var.name in outer:
                self.errors.error(
                    var.position, f"{var.name} is aggregated, so it must not be bound outside"
                )
            if occurrences.get(var.name, 0) != 1:
                self.errors.error(
                    var.position,
                    f"{var.name} must appear exactly once in the aggregated atom",
                )
            arg_type = next(
                (
                    attrs.get(a.attribute)
                    for a in agg.atom.args
                    if isinstance(a.term, ast.Variable) and a.term.name == var.name
                ),
                None,
            )
            if agg.function == "sum" and arg_type is not None and arg_type not in NUMERIC:
                self.errors.error(var.position, f"sum needs a number; {var.name} is {arg_type}")
            result_type = arg_type or "int"
        self.bind(agg.result, result_type)

    def check_constraint(self, con: ast.Constraint, bound: set[str]) -> None:
        types: list[str | None] = []
        for term in (con.left, con.right):
            if isinstance(term, ast.Variable):
                if term.name not in bound:
                    self.errors.error(
                        term.position,
                        f"{term.name} is never bound, so this constraint is not grounded",
                    )
                types.append(self.types.get(term.name))
            else:
                types.append(_literal_type(term.value))
        a, b = types
        if a is not None and b is not None and not _compatible(a, b):
            self.errors.error(con.position, f"type clash: cannot compare {a} with {b}")

    def check_head(self, bound: set[str]) -> None:
        head = self.relations[self.rule.head.relation]
        for arg in self.rule.head.args:
            if isinstance(arg.term, ast.Variable):
                if arg.term.name not in bound:
                    self.errors.error(
                        arg.term.position,
                        f"{arg.term.name} is not range restricted: it is not bound by a positive "
                        "atom or an aggregate of the body",
                    )
                    continue
                type_ = self.types.get(arg.term.name)
            else:
                type_ = _literal_type(arg.term.value)
            if type_ is None:
                continue
            known = _unify(head.types, arg.attribute, type_)
            if known is not None:
                self.errors.error(
                    arg.position,
                    f"type clash: {head.name}.{arg.attribute} is {known} in another rule, {type_} here",
                )


def validate(program: ast.Program, text: str, filename: str = "<program>") -> CheckedProgram:
    errors = ErrorSink(text, filename)
    relations = _check_sources(program, errors)
    _collect_heads(program, relations, errors)
    order = _dependency_order(relations, errors)
    errors.raise_if_any()
    for name in order:
        for rule in relations[name].rules:
            _RuleChecker(rule, relations, errors).check()
    views: dict[str, tuple[str, ...]] = {}
    for view in program.views:
        relation = relations.get(view.name)
        if relation is None:
            errors.error(view.position, f"view of unknown relation {view.name!r}")
            continue
        if relation.kind != "derived":
            errors.error(
                view.position, f"{view.name!r} is a source; a view names a derived relation"
            )
            continue
        for attr in view.key:
            if attr not in relation.attributes:
                errors.error(view.position, f"{view.name!r} has no attribute {attr!r}")
        if view.name in views:
            errors.error(view.position, f"view {view.name!r} is declared twice")
        views[view.name] = view.key
    errors.raise_if_any()
    return CheckedProgram(text, relations, views, order)
