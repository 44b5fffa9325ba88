"""Pass 3: CheckedProgram -> PomoRA (a `Plan`): one expression per derived relation.

A rule lowers in the order of pomo_logic.txt §3.1, one small function per step:

1. variables: a rule's columns are named by its variables (they never collide
   with attribute names, which only live inside `lower_atom`);
2. selections (`lower_atom`, `fold_selections`): each atom (or `C := atom`)
   becomes a scan with its constants selected and its attributes renamed to
   variables; the atoms fold left to right into a product (no shared column), a
   semijoin (one side's columns contained in the other's) or a natural join;
3. constraints (`apply_constraints`): one selection of the grounded ones;
4. negations (`apply_negations`): an antijoin each;
5. aggregates: each extends the body with its value (ra.Aggregate); the
   constraints and negations that read an aggregate's result follow it;
6. head unification (`head_project`): variables renamed back to attributes,
   constants added.

A relation is the Distinct of the union of its rules. A recursive stratum
becomes a Fixpoint whose bodies read the stratum's relations through Recur;
`expand_negations` then rewrites each antijoin there into a difference (the
recursive circuit has no antijoin state). `@next`: a relation p with inductive
rules also reads a hidden relation `p@next` (fed by the engine), and its
inductive bodies form the relation `p@ind`, whose value at epoch t is what
`p@next` holds at t+1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.validate import CheckedProgram
from pomoview.planner.ir import ra


def next_name(relation: str) -> str:
    """The hidden source-like relation that holds `relation`'s inductive tuples of this epoch."""
    return f"{relation}@next"


def ind_name(relation: str) -> str:
    """The relation of `relation`'s inductive bodies: what `p@next` holds at the next epoch."""
    return f"{relation}@ind"


@dataclass
class Plan:
    exprs: dict[str, ra.Expr] = field(default_factory=dict)  # derived relations and `p@ind`
    hidden: dict[str, tuple[str, ...]] = field(default_factory=dict)  # `p@next` -> attributes
    inductive: dict[str, str] = field(default_factory=dict)  # p -> `p@ind`


def _operand(term: ast.Term) -> ra.Operand:
    if isinstance(term, ast.Variable):
        return ra.Col(term.name)
    return ra.Const(term.value)


def _relation(name: str, program: CheckedProgram, recursive: frozenset[str]) -> ra.Scan | ra.Recur:
    attrs = tuple(program.relations[name].attributes)
    return ra.Recur(name, attrs) if name in recursive else ra.Scan(name, attrs)


def lower_atom(
    atom: ast.Atom,
    program: CheckedProgram,
    recursive: frozenset[str] = frozenset(),
    cid_variable: str | None = None,
) -> ra.Expr:
    """The atom's matching tuples, one column per distinct variable (§3.1.2).

    With `cid_variable` (`C := atom`), the tuple's `$CID` is computed first and
    becomes the variable's column."""
    scan = _relation(atom.relation, program, recursive)
    source: ra.Expr = ra.CidExtend(scan) if cid_variable is not None else scan
    predicates: list[ra.Compare] = []
    first: dict[str, str] = {}  # variable -> the column that binds it
    for arg in atom.args:
        if isinstance(arg.term, ast.Literal):
            predicates.append(ra.Compare(ra.Col(arg.attribute), "==", ra.Const(arg.term.value)))
        elif arg.term.name in first:
            predicates.append(ra.Compare(ra.Col(arg.attribute), "==", ra.Col(first[arg.term.name])))
        else:
            first[arg.term.name] = arg.attribute
    if cid_variable is not None:
        if cid_variable in first:
            predicates.append(ra.Compare(ra.Col(ra.CID_COLUMN), "==", ra.Col(first[cid_variable])))
        else:
            first[cid_variable] = ra.CID_COLUMN
    if predicates:
        source = ra.Select(source, tuple(predicates))
    return ra.Project(source, tuple((var, ra.Col(col)) for var, col in first.items()))


def fold_selections(sources: list[ra.Expr]) -> ra.Expr:
    """§3.1.2's fold: product, semijoin (containment either way) or natural join."""
    if not sources:
        return ra.Unit()
    acc = sources[0]
    for right in sources[1:]:
        left_cols, right_cols = set(acc.schema), set(right.schema)
        if right_cols <= left_cols:
            acc = ra.SemiJoin(acc, right)
        elif left_cols <= right_cols:
            acc = ra.SemiJoin(right, acc)
        else:  # no shared column: a product; some: a natural join
            acc = ra.Join(acc, right)
    return acc


def _term_names(terms: Iterable[ast.Term]) -> set[str]:
    return {t.name for t in terms if isinstance(t, ast.Variable)}


def apply_constraints(expr: ra.Expr, pending: list[ast.Constraint]) -> tuple[ra.Expr, list[ast.Constraint]]:
    """§3.1.3: selects by every pending constraint whose variables `expr` has."""
    ready = [c for c in pending if _term_names((c.left, c.right)) <= set(expr.schema)]
    if ready:
        expr = ra.Select(
            expr, tuple(ra.Compare(_operand(c.left), c.op, _operand(c.right)) for c in ready)
        )
    return expr, [c for c in pending if c not in ready]


def apply_negations(
    expr: ra.Expr,
    pending: list[ast.Negation],
    program: CheckedProgram,
    recursive: frozenset[str],
) -> tuple[ra.Expr, list[ast.Negation]]:
    """§3.1.4: an antijoin for every pending negation whose variables `expr` has."""
    waiting: list[ast.Negation] = []
    for neg in pending:
        names = _term_names(arg.term for arg in neg.atom.args)
        if not names <= set(expr.schema):
            waiting.append(neg)
            continue
        negated = lower_atom(neg.atom, program, recursive)
        expr = ra.AntiJoin(expr, negated)
    return expr, waiting


def lower_aggregate(
    body: ra.Expr, agg: ast.Aggregate, program: CheckedProgram, recursive: frozenset[str]
) -> ra.Aggregate:
    """§3.1.5 (ours): the body extended with the aggregate over its group."""
    atom = lower_atom(agg.atom, program, recursive)
    values = tuple(v.name for v in agg.arguments)
    # Variables the atom binds locally stay inside it (§2.5.3): keep only the group
    # columns (shared with the body) and the aggregated values.
    keep = [c for c in atom.schema if c in body.schema or c in values]
    if keep != list(atom.schema):
        atom = ra.Project(atom, tuple((c, ra.Col(c)) for c in keep))
    return ra.Aggregate(body, atom, agg.function, values, agg.result.name)


def head_project(expr: ra.Expr, rule: ast.Rule, program: CheckedProgram) -> ra.Expr:
    """§3.1.6: the head's attributes, in the relation's attribute order."""
    head = program.relations[rule.head.relation]
    by_attr = {arg.attribute: _operand(arg.term) for arg in rule.head.args}
    return ra.Project(expr, tuple((attr, by_attr[attr]) for attr in head.attributes))


def lower_rule(
    rule: ast.Rule, program: CheckedProgram, recursive: frozenset[str] = frozenset()
) -> ra.Expr:
    """One rule's result; relations in `recursive` are read through Recur."""
    sources: list[ra.Expr] = []
    for lit in rule.body:
        if isinstance(lit, ast.Atom):
            sources.append(lower_atom(lit, program, recursive))
        elif isinstance(lit, ast.CidBinding):
            sources.append(lower_atom(lit.atom, program, recursive, lit.variable.name))
    expr = fold_selections(sources)
    constraints = [lit for lit in rule.body if isinstance(lit, ast.Constraint)]
    negations = [lit for lit in rule.body if isinstance(lit, ast.Negation)]
    expr, constraints = apply_constraints(expr, constraints)
    expr, negations = apply_negations(expr, negations, program, recursive)
    for lit in rule.body:
        if isinstance(lit, ast.Aggregate):
            expr = lower_aggregate(expr, lit, program, recursive)
            expr, constraints = apply_constraints(expr, constraints)
            expr, negations = apply_negations(expr, negations, program, recursive)
    assert not constraints and not negations, "validation guarantees they are grounded"
    return head_project(expr, rule, program)


def _map_children(expr: ra.Expr, fn: dict[int, ra.Expr]) -> ra.Expr:
    """`expr` with each direct child c replaced by fn[id(c)] (same object when unchanged)."""
    if isinstance(expr, (ra.Select, ra.Project, ra.Distinct)):
        new = fn[id(expr.input)]
        return expr if new is expr.input else replace(expr, input=new)
    if isinstance(expr, (ra.Join, ra.SemiJoin, ra.AntiJoin, ra.Difference)):
        left, right = fn[id(expr.left)], fn[id(expr.right)]
        if left is expr.left and right is expr.right:
            return expr
        return replace(expr, left=left, right=right)
    if isinstance(expr, ra.Aggregate):
        body, atom = fn[id(expr.body)], fn[id(expr.atom)]
        return expr if body is expr.body and atom is expr.atom else replace(expr, body=body, atom=atom)
    if isinstance(expr, ra.Union):
        inputs = tuple(fn[id(i)] for i in expr.inputs)
        return expr if all(a is b for a, b in zip(inputs, expr.inputs, strict=True)) else ra.Union(inputs)
    return expr


def expand_negations(expr: ra.Expr) -> ra.Expr:
    """Inside a fixpoint: `left ▷ right` -> `left − (left ⋉ δ(right))` when left is recursive.

    `right` is of a lower stratum (a negation is a negative edge), so its distinct
    value can be computed outside the loop; the semijoin and the difference are
    bilinear/linear and run incrementally over nested time."""
    done: dict[int, ra.Expr] = {}
    for child in ra.children(expr):
        done[id(child)] = expand_negations(child)
    expr = _map_children(expr, done)
    if isinstance(expr, ra.AntiJoin) and ra.mentions_recur(expr.left):
        assert not ra.mentions_recur(expr.right), "stratification forbids negation in a cycle"
        return ra.Difference(expr.left, ra.SemiJoin(expr.left, ra.Distinct(expr.right)))
    return expr


def _union(exprs: list[ra.Expr]) -> ra.Expr:
    return ra.Distinct(exprs[0] if len(exprs) == 1 else ra.Union(tuple(exprs)))


def relation_expr(
    name: str, program: CheckedProgram, recursive: frozenset[str], plan: Plan
) -> ra.Expr:
    """A derived relation: the distinct union of its deductive rules (and of `p@next`)."""
    relation = program.relations[name]
    rules = [lower_rule(rule, program, recursive) for rule in relation.rules if not rule.inductive]
    if any(rule.inductive for rule in relation.rules):
        hidden = next_name(name)
        plan.hidden[hidden] = tuple(relation.attributes)
        rules.append(ra.Scan(hidden, tuple(relation.attributes)))
    return _union(rules)


def lower(program: CheckedProgram) -> Plan:
    """Every derived relation's expression, stratum by stratum (dependencies first)."""
    plan = Plan()
    strata = program.strata
    for stratum in strata:
        if not stratum.recursive:
            for name in stratum.relations:
                plan.exprs[name] = relation_expr(name, program, frozenset(), plan)
            continue
        members = frozenset(stratum.relations)
        bodies = tuple(
            expand_negations(relation_expr(name, program, members, plan))
            for name in stratum.relations
        )
        fixpoint = ra.Fixpoint(tuple(stratum.relations), bodies)
        for name in stratum.relations:
            plan.exprs[name] = ra.Recursive(fixpoint, name)
    for name in program.order:
        inductive = [rule for rule in program.relations[name].rules if rule.inductive]
        if inductive:
            plan.inductive[name] = ind_name(name)
            plan.exprs[ind_name(name)] = _union([lower_rule(rule, program) for rule in inductive])
    return plan
