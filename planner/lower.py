"""Pass 3: CheckedProgram -> PomoRA, one expression per derived relation.

A rule lowers as pomo_logic.txt §3.1 describes: each atom becomes a scan with
its constants selected and its attributes renamed to variable names; the atoms
fold into natural joins; constraints select as soon as their variables are
bound; each aggregate extends the body with its value; the head renames the
variables back to attribute names. A relation is the distinct union of its rules.
"""

from __future__ import annotations

from . import ast, ra
from .validate import CheckedProgram


def _operand(term: ast.Term) -> ra.Operand:
    if isinstance(term, ast.Variable):
        return ra.Col(term.name)
    return ra.Const(term.value)


def lower_atom(atom: ast.Atom, program: CheckedProgram) -> ra.Expr:
    """The atom's matching tuples, one column per distinct variable."""
    relation = program.relations[atom.relation]
    scan = ra.Scan(atom.relation, tuple(relation.attributes))
    predicates: list[ra.Compare] = []
    first: dict[str, str] = {}  # variable -> the attribute that binds it
    for arg in atom.args:
        if isinstance(arg.term, ast.Literal):
            predicates.append(ra.Compare(ra.Col(arg.attribute), "==", ra.Const(arg.term.value)))
        elif arg.term.name in first:
            predicates.append(ra.Compare(ra.Col(arg.attribute), "==", ra.Col(first[arg.term.name])))
        else:
            first[arg.term.name] = arg.attribute
    expr: ra.Expr = ra.Select(scan, tuple(predicates)) if predicates else scan
    return ra.Project(expr, tuple((var, ra.Col(attr)) for var, attr in first.items()))


def _apply_constraints(
    expr: ra.Expr, pending: list[ast.Constraint]
) -> tuple[ra.Expr, list[ast.Constraint]]:
    ready: list[ast.Constraint] = []
    waiting: list[ast.Constraint] = []
    for con in pending:
        names = {t.name for t in (con.left, con.right) if isinstance(t, ast.Variable)}
        (ready if names <= set(expr.schema) else waiting).append(con)
    if ready:
        expr = ra.Select(
            expr, tuple(ra.Compare(_operand(c.left), c.op, _operand(c.right)) for c in ready)
        )
    return expr, waiting


def lower_rule(rule: ast.Rule, program: CheckedProgram) -> ra.Expr:
    body: ra.Expr | None = None
    for lit in rule.body:
        if isinstance(lit, ast.Atom):
            atom = lower_atom(lit, program)
            body = atom if body is None else ra.Join(body, atom)
    expr: ra.Expr = body if body is not None else ra.Unit()
    pending = [lit for lit in rule.body if isinstance(lit, ast.Constraint)]
    expr, pending = _apply_constraints(expr, pending)
    for lit in rule.body:
        if isinstance(lit, ast.Aggregate):
            atom = lower_atom(lit.atom, program)
            value = lit.arguments[0].name if lit.arguments else None
            # Variables the atom binds locally stay inside it (§2.5.3): keep only the
            # group columns (shared with the body) and the aggregated value.
            keep = [c for c in atom.schema if c in expr.schema or c == value]
            if keep != list(atom.schema):
                atom = ra.Project(atom, tuple((c, ra.Col(c)) for c in keep))
            expr = ra.Aggregate(expr, atom, lit.function, value, lit.result.name)
            expr, pending = _apply_constraints(expr, pending)
    assert not pending, "validation guarantees every constraint is grounded"
    head = program.relations[rule.head.relation]
    by_attr = {arg.attribute: _operand(arg.term) for arg in rule.head.args}
    return ra.Project(expr, tuple((attr, by_attr[attr]) for attr in head.attributes))


def lower(program: CheckedProgram) -> dict[str, ra.Expr]:
    """Each derived relation's expression; scans of derived relations refer to these by name."""
    out: dict[str, ra.Expr] = {}
    for name in program.order:
        rules = tuple(lower_rule(rule, program) for rule in program.relations[name].rules)
        out[name] = ra.Distinct(rules[0] if len(rules) == 1 else ra.Union(rules))
    return out
