"""Pass 2: AST -> CheckedProgram: names, attributes, scoping, types, time, strata.

Every problem is reported with its position; all problems of a program are
collected before the pass fails. The checks (pomo_logic.txt, DESIGN §2):

- names: unknown relations and attributes, duplicate declarations, rules that
  derive into a source, a derived relation whose rules disagree on its attributes;
- range restriction and grounding (§1.1, §2.4): a variable is *bound* by a
  positive atom, by `C := atom` (C and the atom's variables) or as an
  aggregate's result. Head variables, and the variables of negations and
  constraints, must be bound;
- aggregate scoping (§2.5.3): the variables of an aggregate's atom that the
  rest of the body does not bind are local to it and do not escape; the
  aggregated variables must be local and appear exactly once in the atom;
- types: sources declare theirs; a derived relation's are inferred from its
  rules (to a fixed point, so recursion works) and must agree across rules;
- time (§2.1): see `_instantaneous` and `_RuleChecker.check_inductive`;
- stratification (§2.3): see planner/stratify.py.

Normalisation: an aggregate whose result variable is already bound elsewhere
in the body (the spec's "if this unification fails ... the search fails") is
rewritten to bind a fresh variable `N#k` plus the constraint `N#k == N`, so
later passes only ever see aggregates that bind a new variable.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import ErrorSink, Position
from pomoview.planner.frontend.stratify import Edge, Stratum, stratify
from pomoview.planner.frontend.values import ANY, NUMERIC, TYPES

AGGREGATES = {"count": 0, "sum": 1, "min": 1, "max": 1}


@dataclass
class Relation:
    name: str
    attributes: list[str]
    types: dict[str, str]
    kind: str  # "source" | "derived"
    position: Position
    rules: list[ast.Rule] = field(default_factory=list)  # deductive and inductive
    transient: bool = False  # a `transient source`: tuples live for one epoch


@dataclass
class CheckedProgram:
    text: str
    relations: dict[str, Relation]
    views: dict[str, tuple[str, ...]]
    order: list[str]  # derived relations, dependencies first (= the strata, flattened)
    strata: list[Stratum] = field(default_factory=list)
    user_aggregates: frozenset[str] = frozenset()

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


def _compatible(a: str, b: str) -> bool:
    return a == b or ANY in (a, b) or (a in NUMERIC and b in NUMERIC)


def _literal_fits(literal: str, type_: str) -> bool:
    # A CID is written as its text, so a string constant may stand for one.
    return _compatible(literal, type_) or (literal == "string" and type_ == "cid")


def _check_sources(program: ast.Program, errors: ErrorSink) -> dict[str, Relation]:
    relations: dict[str, Relation] = {}
    for decl in program.sources:
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
            bound |= {v.name for v in _variables(lit)}
        elif isinstance(lit, ast.CidBinding):
            bound |= {v.name for v in _variables(lit.atom)} | {lit.variable.name}
    producer = {a.result.name: i for i, a in enumerate(aggs) if a.result.name not in bound}
    needs = [
        {producer[v.name] for v in _variables(a.atom) if v.name in producer and producer[v.name] != i}
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


def _collect_heads(program: ast.Program, relations: dict[str, Relation], errors: ErrorSink) -> None:
    for rule in map(_order_aggregates, program.rules):
        head = rule.head
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
            else:
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


_EDGE_KIND = {
    ast.Atom: ("atom", False),
    ast.CidBinding: ("content id", False),
    ast.Negation: ("negation", True),
    ast.Aggregate: ("aggregate", True),
}


def dependency_edges(relations: dict[str, Relation]) -> list[Edge]:
    """The precedence graph of §2.3 over derived relations: deductive rules only."""
    edges: list[Edge] = []
    for name, relation in relations.items():
        for rule in relation.rules:
            if rule.inductive:
                continue
            for lit in rule.body:
                if isinstance(lit, ast.Constraint):
                    continue
                atom = lit if isinstance(lit, ast.Atom) else lit.atom
                target = relations.get(atom.relation)
                if target is None or target.kind != "derived":
                    continue
                kind, negative = _EDGE_KIND[type(lit)]
                edges.append(Edge(name, atom.relation, negative, lit.position, kind))
    return edges


def _stratify(relations: dict[str, Relation], errors: ErrorSink) -> list[Stratum]:
    derived = [n for n, r in relations.items() if r.kind == "derived"]
    strata, bad = stratify(derived, dependency_edges(relations))
    for problem in bad:
        edge = problem.edge
        errors.error(
            edge.position,
            f"the program cannot be stratified: the cycle {problem.describe(12)} goes through "
            f"this {edge.kind} ({edge.head} depends negatively on {edge.body})",
        )
    return strata


def _check_recursive_cids(
    relations: dict[str, Relation], strata: list[Stratum], errors: ErrorSink
) -> None:
    """Refuses `C := atom` over a relation of the rule's own recursive stratum.

    A CID is a new value for every new tuple, so a recursive rule that puts the CID of a
    tuple of its own stratum into a head derives new tuples without end (pomo_logic §2.3
    leaves this open: "we may want to constrain the use of content identifiers in mutually
    recursive rules"). We refuse it rather than let the fixed point run until its limit.
    """
    for stratum in strata:
        if not stratum.recursive:
            continue
        members = set(stratum.relations)
        for name in stratum.relations:
            for rule in relations[name].rules:
                if rule.inductive:
                    continue
                for lit in rule.body:
                    if isinstance(lit, ast.CidBinding) and lit.atom.relation in members:
                        errors.error(
                            lit.position,
                            f"the content id of {lit.atom.relation!r} is taken inside its own "
                            f"recursive stratum ({', '.join(sorted(members))}): every new tuple "
                            "would have a new id, so the recursion would never end",
                        )


def _positive_atoms(rule: ast.Rule) -> list[ast.Atom]:
    return [
        lit if isinstance(lit, ast.Atom) else lit.atom
        for lit in rule.body
        if isinstance(lit, (ast.Atom, ast.CidBinding))
    ]


def _instantaneous(relations: dict[str, Relation]) -> set[str]:
    """The relations that are empty in an epoch without events (§2.1's TODO, our reading).

    A relation is *instantaneous* when it is a transient source, or a derived
    relation without inductive rules each of whose rules reads an instantaneous
    relation positively (an atom or `C := atom`). This is the greatest such set,
    computed by removing candidates until nothing changes (so recursion through
    instantaneous relations keeps them instantaneous). We require EVERY rule to
    read one, not just some: a relation that is also derived from persistent
    data does not empty itself, and an inductive rule reading it could then
    change the IDB forever over a static EDB, which is what §2.1 forbids.
    """
    candidates = {
        n
        for n, r in relations.items()
        if r.transient or (r.kind == "derived" and not any(rule.inductive for rule in r.rules))
    }
    # Worklist, linear in the program: `support[i]` counts rule i's positive atoms over
    # candidates (with repeats); a rule at 0 evicts its head, which lowers the counts of
    # the rules that read the head.
    rules = [(n, rule) for n in candidates if relations[n].kind == "derived" for rule in relations[n].rules]
    support = [0] * len(rules)
    readers: dict[str, list[int]] = {}
    for i, (_, rule) in enumerate(rules):
        for atom in _positive_atoms(rule):
            if atom.relation in candidates:
                support[i] += 1
                readers.setdefault(atom.relation, []).append(i)
    evicted = [head for i, (head, _) in enumerate(rules) if support[i] == 0]
    while evicted:
        name = evicted.pop()
        if name not in candidates:
            continue
        candidates.discard(name)
        for i in readers.get(name, ()):
            support[i] -= 1
            if support[i] == 0:
                evicted.append(rules[i][0])
    return candidates


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


def _variables(atom: ast.Atom) -> list[ast.Variable]:
    return [arg.term for arg in atom.args if isinstance(arg.term, ast.Variable)]


class _RuleChecker:
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
        names = {v.name for v in _variables(atom)}
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
        for var in _variables(neg.atom):
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
        inner = {v.name for v in _variables(agg.atom)}
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
        or reads an instantaneous relation (see `_instantaneous`) positively."""
        head = self.rule.head
        atoms = _positive_atoms(self.rule)
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


def _normalise(rule: ast.Rule) -> ast.Rule:
    """Rewrites `N := agg ...` with N bound elsewhere to `N#k := agg ..., N#k == N`."""
    earlier: set[str] = set()
    for lit in rule.body:
        if isinstance(lit, ast.Atom):
            earlier |= {v.name for v in _variables(lit)}
        elif isinstance(lit, ast.CidBinding):
            earlier |= {v.name for v in _variables(lit.atom)} | {lit.variable.name}
    body: list[ast.BodyLiteral] = []
    extra: list[ast.BodyLiteral] = []
    for k, lit in enumerate(rule.body):
        if isinstance(lit, ast.Aggregate) and lit.result.name in earlier:
            fresh = ast.Variable(f"{lit.result.name}#{k}", lit.result.position)
            body.append(replace(lit, result=fresh))
            extra.append(ast.Constraint(fresh, "==", lit.result, lit.result.position))
            continue
        if isinstance(lit, ast.Aggregate):
            earlier.add(lit.result.name)
        body.append(lit)
    return rule if not extra else replace(rule, body=tuple(body + extra))


def _infer_types(
    rules: list[ast.Rule],
    relations: dict[str, Relation],
    user: Collection[str],
    instantaneous: set[str],
    scratch: ErrorSink,
) -> None:
    """Infers derived attribute types to a fixed point (recursion reads types that are not
    inferred yet): a worklist that rechecks the rules reading a relation whose types grew.
    A rule is rechecked at most once per attribute it reads, so this stays linear-ish even
    for a long recursive cycle. Errors go to `scratch`: the caller checks again, reporting."""
    readers: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        for lit in rule.body:
            if not isinstance(lit, ast.Constraint):
                atom = lit if isinstance(lit, ast.Atom) else lit.atom
                readers.setdefault(atom.relation, []).append(i)
    queue = deque(range(len(rules)))
    queued = set(queue)
    while queue:
        i = queue.popleft()
        queued.discard(i)
        head = relations.get(rules[i].head.relation)
        before = len(head.types) if head is not None else 0
        _RuleChecker(rules[i], relations, scratch, user, instantaneous).check()
        if head is not None and len(head.types) != before:
            for j in readers.get(head.name, ()):
                if j not in queued:
                    queued.add(j)
                    queue.append(j)


def validate(
    program: ast.Program,
    text: str,
    filename: str = "<program>",
    aggregates: Collection[str] = (),
) -> CheckedProgram:
    """Checks `program`; `aggregates` names the user-defined aggregate functions."""
    user = frozenset(aggregates) - set(AGGREGATES)  # the built-ins keep their meaning
    errors = ErrorSink(text, filename)
    relations = _check_sources(program, errors)
    _collect_heads(program, relations, errors)
    strata = _stratify(relations, errors)
    _check_recursive_cids(relations, strata, errors)
    order = [name for stratum in strata for name in stratum.relations]
    instantaneous = _instantaneous(relations)
    rules = [rule for name in order for rule in relations[name].rules]

    def check_all(sink: ErrorSink) -> set[str]:
        used: set[str] = set()
        for rule in rules:
            checker = _RuleChecker(rule, relations, sink, user, instantaneous)
            checker.check()
            used |= checker.used_aggregates
        return used

    _infer_types(rules, relations, user, instantaneous, ErrorSink(text, filename))
    derived = [r for r in relations.values() if r.kind == "derived"]
    used = check_all(errors)
    for rel in derived:
        for attr in rel.attributes:
            rel.types.setdefault(attr, ANY)
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
    for rel in derived:
        rel.rules = [_normalise(rule) for rule in rel.rules]
    return CheckedProgram(text, relations, views, order, strata, frozenset(used))
