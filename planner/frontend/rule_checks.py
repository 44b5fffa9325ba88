"""The checks of one rule (pomo_logic §1.1, §2.1, §2.4, §2.5.3): its names, the scoping and
grounding of its variables, the types of its constants, variables and head, and the time of
an inductive rule. `RuleChecker` also fills in its head's inferred types (type_inference.py
runs it to a fixed point)."""

from __future__ import annotations

from collections.abc import Collection

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.dependencies import positive_atoms
from pomoview.planner.frontend.errors import ErrorSink
from pomoview.planner.frontend.relations import Relation, variables
from pomoview.planner.frontend.values import ANY, NUMERIC

AGGREGATES = {"count": 0, "sum": 1, "min": 1, "max": 1}


def _literal_type(value: ast.Constant) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "string"


def _compatible(a: str, b: str) -> bool:
    return a == b or ANY in (a, b) or (a in NUMERIC and b in NUMERIC)


def _literal_fits(literal: str, type_: str) -> bool:
    # A CID is written as its text, so a string constant may stand for one.
    return _compatible(literal, type_) or (literal == "string" and type_ == "cid")



def _same_term(a: ast.Term, b: ast.Term) -> bool:
    if isinstance(a, ast.Variable) and isinstance(b, ast.Variable):
        return a.name == b.name
    if isinstance(a, ast.Literal) and isinstance(b, ast.Literal):
        return type(a.value) is type(b.value) and a.value == b.value
    return False


def _same_bindings(head: ast.Atom, atom: ast.Atom) -> bool:
    if head.relation != atom.relation or len(head.args) != len(atom.args):
        return False
    mine = {arg.attribute: arg.term for arg in head.args}
    return all(
        arg.attribute in mine and _same_term(mine[arg.attribute], arg.term) for arg in atom.args
    )


class RuleChecker:
    """Checks one rule's names, scoping, grounding and types; fills its head's types."""

    def __init__(
        self,
        rule: ast.Rule,
        relations: dict[str, Relation],
        errors: ErrorSink,
        user_aggregates: Collection[str],
        instantaneous: set[str],
    ) -> None:
        self.rule = rule
        self.relations = relations
        self.errors = errors
        self.user_aggregates = user_aggregates
        self.instantaneous = instantaneous
        self.types: dict[str, str] = {}
        self.used_aggregates: set[str] = set()

    def bind(self, var: ast.Variable, type_: str | None) -> None:
        if type_ is None or type_ == ANY:
            return
        known = self.types.setdefault(var.name, type_)
        if known != type_:
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
        """Checks names and constants; binds variable types if `bind`; returns its variables."""
        attrs = self.atom_attrs(atom)
        names = {v.name for v in variables(atom)}
        if attrs is None:  # unknown relation (reported): its variables still count as bound
            return names
        for arg in atom.args:
            type_ = attrs.get(arg.attribute)
            if isinstance(arg.term, ast.Literal):
                lit = _literal_type(arg.term.value)
                if type_ is not None and not _literal_fits(lit, type_):
                    self.errors.error(
                        arg.term.position,
                        f"type clash: {atom.relation}.{arg.attribute} is {type_}, "
                        f"the constant is {lit}",
                    )
            elif bind:
                self.bind(arg.term, type_)
        return names

    def check(self) -> None:
        rule = self.rule
        positive: set[str] = set()  # bound by atoms and content id bindings
        for lit in rule.body:
            if isinstance(lit, ast.Atom):
                positive |= self.check_atom(lit, bind=True)
            elif isinstance(lit, ast.CidBinding):
                positive |= self.check_atom(lit.atom, bind=True)
                positive.add(lit.variable.name)
                self.bind(lit.variable, "cid")
        results = {lit.result.name for lit in rule.body if isinstance(lit, ast.Aggregate)}
        earlier: set[str] = set()  # results of the aggregates before this one
        for lit in rule.body:
            if isinstance(lit, ast.Aggregate):
                self.check_aggregate(lit, positive, earlier, results)
                earlier.add(lit.result.name)
        bound = positive | results
        for lit in rule.body:
            if isinstance(lit, ast.Negation):
                self.check_negation(lit, bound)
            elif isinstance(lit, ast.Constraint):
                self.check_constraint(lit, bound)
        self.check_head(bound)
        if rule.inductive:
            self.check_inductive()

    def _not_grounded(self, var: ast.Variable, what: str) -> None:
        self.errors.error(
            var.position,
            f"{var.name} is never grounded, so this {what} cannot be evaluated: bind it with a "
            "positive atom, a content id (C := atom) or an aggregate result in the body",
        )

    def check_negation(self, neg: ast.Negation, bound: set[str]) -> None:
        self.check_atom(neg.atom, bind=True)
        for var in variables(neg.atom):
            if var.name not in bound:
                self._not_grounded(var, "negation")

    def check_aggregate(
        self, agg: ast.Aggregate, positive: set[str], earlier: set[str], results: set[str]
    ) -> None:
        """Scoping (§2.5.3). The atom's variables bound outside group it: those of positive
        atoms and content ids, and the results of aggregates EARLIER in the body (as in
        clingo, where they are global; body order rules out cycles between aggregates).
        Its other variables are local to it."""
        if not agg.colon:
            self.errors.error(
                agg.atom.position, "missing ':' between the aggregate and its atom"
            )
        arity = AGGREGATES.get(agg.function)
        if arity is None and agg.function not in self.user_aggregates:
            known = [*AGGREGATES, *sorted(self.user_aggregates)]
            self.errors.error(
                agg.position,
                f"unknown aggregate {agg.function!r}; expected one of {', '.join(known)}",
            )
            return
        if arity is None:
            self.used_aggregates.add(agg.function)
        elif len(agg.arguments) != arity:
            self.errors.error(agg.position, f"{agg.function} takes {arity} variable(s)")
            return
        result = agg.result
        outer = positive | earlier
        inner = {v.name for v in variables(agg.atom)}
        if result.name in inner and result.name not in outer:
            self.errors.error(
                result.position,
                f"{result.name} is this aggregate's result, so it cannot appear in its own atom",
            )
        attrs = self.atom_attrs(agg.atom) or {}
        self.check_atom(agg.atom, bind=False)
        occurrences: dict[str, int] = {}
        for arg in agg.atom.args:
            if not isinstance(arg.term, ast.Variable):
                continue
            name = arg.term.name
            occurrences[name] = occurrences.get(name, 0) + 1
            if name in outer:  # a grouping variable, shared with the body
                self.bind(arg.term, attrs.get(arg.attribute))
            elif name in results and name != result.name:
                self.errors.error(
                    arg.term.position,
                    f"{name} is the result of a later aggregate; put that aggregate first "
                    "to group this one by it",
                )
        result_type: str | None = "int" if agg.function == "count" else None
        for var in agg.arguments:
            if var.name in outer or var.name in results:
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
            if agg.function == "sum" and arg_type not in (None, ANY, *NUMERIC):
                self.errors.error(var.position, f"sum needs a number; {var.name} is {arg_type}")
            if agg.function in AGGREGATES:
                result_type = arg_type
        if agg.function == "sum" and result_type is None:
            result_type = "int"
        self.bind(result, result_type)

    def check_constraint(self, con: ast.Constraint, bound: set[str]) -> None:
        types: list[str | None] = []
        for term in (con.left, con.right):
            if isinstance(term, ast.Variable):
                if term.name not in bound:
                    self._not_grounded(term, "constraint")
                types.append(self.types.get(term.name))
            else:
                types.append(_literal_type(term.value))
        a, b = types
        if a is not None and b is not None and not (_literal_fits(a, b) or _literal_fits(b, a)):
            self.errors.error(con.position, f"type clash: cannot compare {a} with {b}")

    def check_head(self, bound: set[str]) -> None:
        head = self.relations.get(self.rule.head.relation)
        if head is None or head.kind != "derived":
            return
        for arg in self.rule.head.args:
            if isinstance(arg.term, ast.Variable):
                if arg.term.name not in bound:
                    self.errors.error(
                        arg.term.position,
                        f"{arg.term.name} is not range restricted: it is not bound by a positive "
                        "atom, a content id or an aggregate of the body",
                    )
                    continue
                type_ = self.types.get(arg.term.name)
            else:
                type_ = _literal_type(arg.term.value)
            if type_ is None or arg.attribute not in head.attributes:
                continue
            known = head.types.setdefault(arg.attribute, type_)
            if known != type_:
                self.errors.error(
                    arg.position,
                    f"type clash: {head.name}.{arg.attribute} is {known} in another rule, {type_} here",
                )

    def check_inductive(self) -> None:
        """§2.1: an inductive rule repeats its head atom in its body with the same bindings,
        or reads an instantaneous relation (see `dependencies.instantaneous`) positively."""
        head = self.rule.head
        atoms = positive_atoms(self.rule)
        if any(_same_bindings(head, a) for a in self.rule.body if isinstance(a, ast.Atom)):
            return
        if any(a.relation in self.instantaneous for a in atoms):
            return
        self.errors.error(
            self.rule.position,
            f"this inductive rule could change {head.relation!r} forever (pomo_logic §2.1): its "
            "body must contain its head atom with the same bindings, or read a transient source "
            "(or a relation derived only from transient sources) positively",
        )


def check_rules(
    rules: list[ast.Rule],
    relations: dict[str, Relation],
    errors: ErrorSink,
    user_aggregates: Collection[str],
    instantaneous: set[str],
) -> set[str]:
    """Checks every rule, reporting to `errors`; returns the user-defined aggregates used."""
    used: set[str] = set()
    for rule in rules:
        checker = RuleChecker(rule, relations, errors, user_aggregates, instantaneous)
        checker.check()
        used |= checker.used_aggregates
    return used
