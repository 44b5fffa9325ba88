"""Pass 3b: cyclic rule bodies -> one ra.MultiJoin each (PomoRA -> PomoRA, after lower).

When it fires: on a maximal tree of Joins and SemiJoins (a rule body's atoms, as
lower.fold_selections folds them) of three atoms or more, and at most MAX_ATOMS, whose join
graph, the atoms as hyperedges over their variables, has a cycle: it is not α-acyclic (the
GYO reduction, which drops a variable no other atom holds and an atom whose variables
another atom holds, does not leave a single atom). A triangle `e(a,b), e(b,c), e(a,c)`, a
4-cycle and a 4-clique fire; a path and a star do not, nor does a triangle with a fourth
atom holding all three variables (each edge is inside it). The tree, and the comparisons of
the Select that lower.apply_constraints put right above it, become one MultiJoin whose
constraints are those comparisons (one between two constants stays in a Select above it).
A negation right above it (an AntiJoin, lower.py's) becomes a negated atom of the MultiJoin,
tested inside the operator as soon as a binding is whole; aggregates stay above it.

Why: a chain of binary joins over a cyclic body materializes and keeps an intermediate
(a triangle's two-paths) that can be far larger than both the inputs and the answer, and
maintains it at every write. The MultiJoin is built as a worst-case-optimal join
(dataflow/operators/wcoj.py) that keeps per-attribute indexes of its inputs only and
extends bindings variable by variable. On an α-acyclic body a binary plan has no such
blow-up to avoid (its intermediates join along a tree), and keeps partial state, which the
MultiJoin does not: it is full whatever its key (provenance.py says why); a keyed reader of
it gets the demand transformation instead (planner/demand/readers.py).

Inside a recursive stratum (a Fixpoint's bodies) a body runs in a nested circuit over 2-D
time, where a WcojJoin's indexes, which hold one time, cannot follow the recursion. First,
the atoms of a join tree that read no relation of the stratum (through Recur) are split
into connected components (atoms sharing a variable); each component of three atoms or more
whose join graph has a cycle becomes one MultiJoin, with the comparisons over
its variables only as its constraints, projected on the variables the rest of the body reads
(the other atoms, the comparisons left above, the head). The builder builds it outside the
loop (full, as every part that reads no recursion) and the loop joins it by a binary join in
place of its first atom. `r(x: X, y: Z) :- r(x: X, y: Y), e(src: Y, dst: Z), e(src: Z, dst: W),
e(src: Y, dst: W)` then keeps e's triangles (Y, Z) once, outside, where the binary chain kept,
inside the loop and at every iteration, each reached X's two-paths from Y.

Then, when the parts of the body left (the recursive atom, those MultiJoins, the other
atoms) are 3 or more with a cycle through exactly one atom reading the recursion (`r(A, B),
e(B, C), f(A, C)`), they become one MultiJoin with that atom among its atoms, which the
builder builds inside the loop as a NestedWcoj (dataflow/operators/nested_wcoj.py: linear
in the recursive atom, it keeps that atom's indexes per iteration and the others' once).

Where it does not fire:
- a cycle through two recursive atoms (`r(A, B), r(B, C), e(A, C)`): the product of two
  recursive deltas is not the NestedWcoj's; binary joins;
- on more than MAX_ATOMS atoms: the operator plans one path per atom, each quadratic in the
  atoms, and this pass's reduction is quadratic too (a 1,000-atom body stays binary).

Atoms: one lowered to `Project(Scan)` or `Project(Select(Scan, attribute == constant...))`
that binds each attribute of the scan to a variable of its own or to a constant becomes the
scan with its terms, equal scans being one object so that the operator indexes a relation
read by several atoms once. Any other input (a repeated variable, an attribute left unbound,
a content id, a derived relation's rows renamed) is kept whole, its columns its variables.

MultiJoins of one form are one object, so that the builder builds one WcojJoin for them:
equal ones (two rules with one body), and ones equal up to their variables' names, the
later under a Project renaming the first's columns (`_Rewriter._shared`).

The pass is iterative (no Python frame per operator) and memoized by object, so a
sub-expression shared by two relations is rewritten once.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace

from pomoview.planner.ir import ra

MAX_ATOMS = 32

Atom = tuple[ra.Expr, tuple[ra.AtomTerm, ...]]  # a MultiJoin's atom: (input, terms)

_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def multi_joins(exprs: Mapping[str, ra.Expr]) -> dict[str, ra.Expr]:
    """Every relation's expression with its cyclic bodies as MultiJoins (see the module
    docstring); the others unchanged, the same objects."""
    rewriter = _Rewriter()
    return {name: rewriter.rewrite(expr) for name, expr in exprs.items()}


def cyclic(edges: list[frozenset[str]]) -> bool:
    """Whether the hypergraph of `edges` is not α-acyclic (GYO reduction)."""
    live = [set(e) for e in edges]
    changed = True
    while changed and len(live) > 1:
        changed = False
        holders: dict[str, int] = {}
        for e in live:
            for v in e:
                holders[v] = holders.get(v, 0) + 1
        for e in live:
            lonely = {v for v in e if holders[v] == 1}
            if lonely:
                e -= lonely
                changed = True
        for i, e in enumerate(live):
            if any(e <= f for j, f in enumerate(live) if j != i):
                del live[i]  # one at a time: two equal edges must not remove each other
                changed = True
                break
    return len(live) > 1


def _tree(root: ra.Join | ra.SemiJoin) -> list[ra.Expr]:
    """The leaves of the join tree at `root`, left to right."""
    leaves: list[ra.Expr] = []
    stack: list[ra.Expr] = [root]
    while stack:
        expr = stack.pop()
        if isinstance(expr, (ra.Join, ra.SemiJoin)):
            stack.extend((expr.right, expr.left))
        else:
            leaves.append(expr)
    return leaves


def _is_tree(expr: ra.Expr) -> bool:
    return isinstance(expr, (ra.Join, ra.SemiJoin))


class _Rewriter:
    def __init__(self) -> None:
        self.done: dict[int, ra.Expr] = {}  # id(expr) -> its rewrite
        self.scans: dict[ra.Scan, ra.Scan] = {}  # equal scans as one object
        self.fixpoints: dict[int, ra.Fixpoint] = {}  # id(fixpoint) -> its rewrite: one loop each
        self.recur: dict[int, bool] = {}  # id(expr) -> whether it reads a Recur
        self.joins: dict[ra.Expr, ra.Expr] = {}  # equal MultiJoins as one object
        # A MultiJoin's form up to its variables' names -> the first made of that form, and
        # its variables' numbers in the form.
        self.forms: dict[Hashable, tuple[ra.MultiJoin, dict[str, int]]] = {}
        # id(the Project renaming a shared MultiJoin) -> (it, the MultiJoin it stands for):
        # a negation above it folds into the MultiJoin, which is then shared as a whole.
        self.renamed: dict[int, tuple[ra.Project, ra.MultiJoin]] = {}

    def rewrite(self, root: ra.Expr) -> ra.Expr:
        # Post-order without recursion. A join tree's inner joins are not visited: the tree
        # is decided whole at its root (or at the Select above it), from its leaves.
        stack: list[tuple[ra.Expr, bool]] = [(root, False)]
        while stack:
            expr, ready = stack.pop()
            if id(expr) in self.done:
                continue
            if not ready:
                stack.append((expr, True))
                stack.extend((c, False) for c in self._below(expr) if id(c) not in self.done)
                continue
            self.done[id(expr)] = self._one(expr)
        return self.done[id(root)]

    def _below(self, expr: ra.Expr) -> tuple[ra.Expr, ...]:
        if isinstance(expr, (ra.Recursive, ra.CidExtend)):
            return ()  # a fixpoint's bodies are rewritten at its Recursive; a CidExtend reads a scan
        if _is_tree(expr):
            return tuple(_tree(expr))  # type: ignore[arg-type]
        if isinstance(expr, ra.Select) and _is_tree(expr.input):
            return tuple(_tree(expr.input))  # type: ignore[arg-type]
        loop = self._loop_tree(expr.input) if isinstance(expr, ra.Project) else None
        if loop is not None:
            return tuple(_tree(loop[0]))  # decided with the columns the Project reads
        return ra.children(expr)

    def _one(self, expr: ra.Expr) -> ra.Expr:
        """`expr` with its children's rewrites, a join tree (under its Select) decided."""
        if isinstance(expr, ra.Recursive):
            fixpoint = self._fixpoint(expr.fixpoint)
            return expr if fixpoint is expr.fixpoint else ra.Recursive(fixpoint, expr.relation)
        if _is_tree(expr):
            return self._join_tree(expr, ())  # type: ignore[arg-type]
        if isinstance(expr, ra.Select) and _is_tree(expr.input):
            return _same(self._join_tree(expr.input, expr.predicates), expr)  # type: ignore[arg-type]
        loop = self._loop_tree(expr.input) if isinstance(expr, ra.Project) else None
        if isinstance(expr, ra.Project) and loop is not None:
            read = {o.name for _, o in expr.outputs if isinstance(o, ra.Col)}
            body = _same(self._in_loop(*loop, needed=read), expr.input)
            return expr if body is expr.input else replace(expr, input=body)
        new = {id(c): self.done[id(c)] for c in self._below(expr)}
        if isinstance(expr, ra.AntiJoin):
            left = new[id(expr.left)]
            if id(left) in self.renamed:
                left = self.renamed[id(left)][1]
            if isinstance(left, ra.MultiJoin):
                return self._shared(self._negated(left, new[id(expr.right)]))
        return _with_children(expr, new)

    def _negated(self, joined: ra.MultiJoin, right: ra.Expr) -> ra.Expr:
        """`not right` above a MultiJoin, as one of its negated atoms: the operator then tests
        it as soon as a binding is whole, in its own update paths, with no state but its
        index (an AntiJoin above would keep the join's rows keyed, and its right side).
        One over no variable (all constants) stays an AntiJoin."""
        if not right.schema:
            return ra.AntiJoin(joined, right)
        return replace(joined, negated=joined.negated + (self._atom(right),))

    def _shared(self, joined: ra.Expr) -> ra.Expr:
        """`joined`, or an equal MultiJoin made before (two rules with one body), or one equal
        to it up to its variables' names under a Project renaming them (`tri(a,b,c)` and
        `ring(x,y,z)` over one triangle): the builder then builds one WcojJoin for all of
        them, as it builds a node per expression object; a Project is a Map, linear and
        stateless, where a second WcojJoin would hold its plans and compute every row again.
        Forms are compared with the atoms in their order: a body whose atoms come in another
        order is a WcojJoin of its own (deciding that is graph isomorphism)."""
        same = self.joins.setdefault(joined, joined)
        if same is not joined or not isinstance(joined, ra.MultiJoin):
            return same
        form, names = _form(joined)
        first, numbers = self.forms.setdefault(form, (joined, names))
        if first is joined:
            return joined
        back = {number: name for name, number in numbers.items()}
        renaming = ra.Project(first, tuple((v, ra.Col(back[names[v]])) for v in joined.variables))
        self.renamed[id(renaming)] = (renaming, joined)
        self.joins[joined] = renaming
        return renaming

    def _fixpoint(self, fixpoint: ra.Fixpoint) -> ra.Fixpoint:
        """The stratum with its bodies rewritten, once (its relations' Recursives share it)."""
        done = self.fixpoints.get(id(fixpoint))
        if done is None:
            bodies = tuple(self.rewrite(body) for body in fixpoint.bodies)
            changed = any(new is not old for new, old in zip(bodies, fixpoint.bodies, strict=True))
            done = ra.Fixpoint(fixpoint.relations, bodies) if changed else fixpoint
            self.fixpoints[id(fixpoint)] = done
        return done

    def _reads_recur(self, expr: ra.Expr) -> bool:
        return ra.mentions_recur(expr, self.recur)

    def _loop_tree(self, expr: ra.Expr) -> tuple[ra.Join | ra.SemiJoin, tuple[ra.Compare, ...]] | None:
        """(tree, comparisons) when `expr` is a join tree, or a Select over one, with an atom
        that reads the enclosing stratum's recursion; else None."""
        predicates: tuple[ra.Compare, ...] = ()
        if isinstance(expr, ra.Select):
            predicates = expr.predicates
            expr = expr.input
        if not isinstance(expr, (ra.Join, ra.SemiJoin)):
            return None
        if not any(self._reads_recur(leaf) for leaf in _tree(expr)):
            return None
        return expr, predicates

    def _join_tree(self, root: ra.Join | ra.SemiJoin, predicates: tuple[ra.Compare, ...]) -> ra.Expr:
        if self._loop_tree(root) is not None:
            return self._in_loop(root, predicates, needed=None)
        leaves = [self.done[id(leaf)] for leaf in _tree(root)]
        # An atom with no variable (all constants) only says whether its tuple exists: the
        # operator wants a variable per atom, so it is joined above it (a semijoin on no column).
        guards = [leaf for leaf in leaves if not leaf.schema]
        atoms = self._cyclic_atoms([leaf for leaf in leaves if leaf.schema])
        if atoms is not None:
            joined = self._shared(_multi_join(root.schema, atoms, predicates))
            for guard in guards:
                joined = ra.SemiJoin(joined, guard)
            return joined
        return self._unchanged(root, predicates)

    def _unchanged(self, root: ra.Join | ra.SemiJoin, predicates: tuple[ra.Compare, ...]) -> ra.Expr:
        """The join tree over its leaves' rewrites, under its comparisons."""
        tree = _rebuild_tree(root, {id(old): self.done[id(old)] for old in _tree(root)})
        return ra.Select(tree, predicates) if predicates else tree

    def _cyclic_atoms(self, parts: list[ra.Expr]) -> tuple[Atom, ...] | None:
        """The parts as the MultiJoin's atoms, when they are 3 to MAX_ATOMS and their join
        graph has a cycle; else None."""
        atoms = tuple(self._atom(part) for part in parts)
        edges = [frozenset(t for t in terms if isinstance(t, str)) for _, terms in atoms]
        return atoms if 3 <= len(atoms) <= MAX_ATOMS and cyclic(edges) else None

    def _in_loop(
        self, root: ra.Join | ra.SemiJoin, predicates: tuple[ra.Compare, ...], needed: set[str] | None
    ) -> ra.Expr:
        """A join tree reading the recursion, its cyclic components of other atoms as
        MultiJoins (module docstring); the tree and its Select unchanged when there is none.
        The result has `root`'s schema, or with `needed` (the columns a Project above reads)
        at least those columns, in any order."""
        leaves = [self.done[id(leaf)] for leaf in _tree(root)]
        free = [i for i, leaf in enumerate(leaves) if leaf.schema and not self._reads_recur(leaf)]
        items: list[ra.Expr | None] = list(leaves)
        rest = list(predicates)
        for members in _components([leaves[i].schema for i in free]):
            members = [free[k] for k in members]
            atoms = self._cyclic_atoms([leaves[i] for i in members])
            if atoms is None:
                continue
            variables = tuple(dict.fromkeys(c for i in members for c in leaves[i].schema))
            mine, rest = _split(rest, variables)
            read = set(root.schema if needed is None else needed).union(*map(_columns, rest))
            for i, item in enumerate(items):
                if item is not None and i not in members:
                    read.update(item.schema)
            joined = self._shared(_multi_join(variables, atoms, mine))
            kept = tuple(v for v in variables if v in read)
            if kept != variables:
                joined = ra.Project(joined, tuple((v, ra.Col(v)) for v in kept))
            items[members[0]] = joined
            for i in members[1:]:
                items[i] = None
        parts = [item for item in items if item is not None]
        through = self._through_recursion(parts, rest)
        if through is None and all(item is leaf for item, leaf in zip(items, leaves, strict=True)):
            return self._unchanged(root, predicates)
        if through is not None:
            parts, rest = through
        out = parts[0]
        for part in parts[1:]:
            out = ra.SemiJoin(out, part) if set(part.schema) <= set(out.schema) else ra.Join(out, part)
        if rest:
            out = ra.Select(out, tuple(rest))
        if needed is None and out.schema != root.schema:
            out = ra.Project(out, tuple((c, ra.Col(c)) for c in root.schema))
        return out

    def _through_recursion(
        self, parts: list[ra.Expr], rest: list[ra.Compare]
    ) -> tuple[list[ra.Expr], list[ra.Compare]] | None:
        """The body's parts as one MultiJoin through its recursive atom (built as a
        NestedWcoj, dataflow/operators/nested_wcoj.py), its guards above it, and the
        comparisons left; None unless the parts with variables are 3 to MAX_ATOMS, their
        join graph has a cycle, and exactly one reads the recursion (two would need the
        products of two recursive deltas, which the operator does not keep)."""
        bodied = [part for part in parts if part.schema]
        atoms = self._cyclic_atoms(bodied) if sum(map(self._reads_recur, parts)) == 1 else None
        if atoms is None:
            return None
        variables = tuple(dict.fromkeys(c for part in bodied for c in part.schema))
        mine, rest = _split(rest, variables)
        return [_multi_join(variables, atoms, mine), *(part for part in parts if not part.schema)], rest

    def _atom(self, leaf: ra.Expr) -> tuple[ra.Expr, tuple[ra.AtomTerm, ...]]:
        """The leaf as (input, terms): the scan it renames, or itself whole."""
        whole: tuple[ra.Expr, tuple[ra.AtomTerm, ...]] = (leaf, leaf.schema)
        if not isinstance(leaf, ra.Project):
            return whole
        inner: ra.Expr = leaf.input
        constants: dict[str, ra.Const] = {}  # attribute -> the constant it must equal
        if isinstance(inner, ra.Select):
            for p in inner.predicates:
                if not (p.op == "==" and isinstance(p.left, ra.Col) and isinstance(p.right, ra.Const)):
                    return whole
                if constants.setdefault(p.left.name, p.right) != p.right:
                    return whole
            inner = inner.input
        if not isinstance(inner, ra.Scan):
            return whole
        variable: dict[str, str] = {}  # attribute -> its variable
        for name, operand in leaf.outputs:
            if not isinstance(operand, ra.Col) or operand.name in variable or operand.name in constants:
                return whole
            variable[operand.name] = name
        if set(variable) | set(constants) != set(inner.schema):
            return whole
        scan = self.scans.setdefault(inner, inner)
        terms = tuple(variable[a] if a in variable else constants[a] for a in scan.schema)
        return scan, terms


def _multi_join(
    schema: tuple[str, ...],
    atoms: tuple[tuple[ra.Expr, tuple[ra.AtomTerm, ...]], ...],
    predicates: tuple[ra.Compare, ...],
) -> ra.Expr:
    """The MultiJoin of `atoms`, the comparisons of `predicates` its constraints (a variable
    on the left); those between constants in a Select above it."""
    constraints: list[ra.Compare] = []
    rest: list[ra.Compare] = []
    for p in predicates:
        if isinstance(p.left, ra.Col):
            constraints.append(p)
        elif isinstance(p.right, ra.Col):
            constraints.append(ra.Compare(p.right, _FLIP[p.op], p.left))
        else:
            rest.append(p)
    joined: ra.Expr = ra.MultiJoin(atoms, schema, tuple(constraints))
    return ra.Select(joined, tuple(rest)) if rest else joined


def _form(joined: ra.MultiJoin) -> tuple[Hashable, dict[str, int]]:
    """The MultiJoin's form with its variables numbered in order of first appearance (the
    atoms' terms, the negated atoms', the constraints'), and that numbering. Two MultiJoins
    of one form compute the same rows, their columns named apart."""
    names: dict[str, int] = {}

    def term(t: ra.AtomTerm | ra.Operand) -> object:
        if isinstance(t, ra.Col):
            return ("col", names.setdefault(t.name, len(names)))
        if isinstance(t, str):
            return names.setdefault(t, len(names))
        return t

    atoms = tuple((i, tuple(map(term, terms))) for i, terms in joined.atoms)
    negated = tuple((i, tuple(map(term, terms))) for i, terms in joined.negated)
    constraints = tuple((term(c.left), c.op, term(c.right)) for c in joined.constraints)
    outputs = frozenset(names.setdefault(v, len(names)) for v in joined.variables)
    return (atoms, negated, constraints, outputs), names


def _same(out: ra.Expr, expr: ra.Expr) -> ra.Expr:
    """`expr` itself when `out` is a Select equal to it over the same input object."""
    same = isinstance(out, ra.Select) and isinstance(expr, ra.Select) and out.input is expr.input
    return expr if same and out.predicates == expr.predicates else out  # type: ignore[union-attr]


def _split(
    predicates: list[ra.Compare], variables: tuple[str, ...]
) -> tuple[tuple[ra.Compare, ...], list[ra.Compare]]:
    """The comparisons over `variables` only (a MultiJoin's constraints), and the others."""
    mine = tuple(p for p in predicates if _columns(p) and _columns(p) <= set(variables))
    return mine, [p for p in predicates if p not in mine]


def _columns(p: ra.Compare) -> set[str]:
    return {o.name for o in (p.left, p.right) if isinstance(o, ra.Col)}


def _components(schemas: list[tuple[str, ...]]) -> list[list[int]]:
    """The indexes of `schemas` grouped by shared columns (connected components), each in
    order, the groups by their first index."""
    parent = list(range(len(schemas)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, schema in enumerate(schemas):
        for c in schema:
            j = first.setdefault(c, i)
            parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(schemas)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values())


def _rebuild_tree(root: ra.Join | ra.SemiJoin, leaves: dict[int, ra.Expr]) -> ra.Expr:
    """The join tree at `root` over the leaves' rewrites (the same objects if none changed)."""
    if all(leaves[id(old)] is old for old in _tree(root)):
        return root
    done: dict[int, ra.Expr] = dict(leaves)
    stack: list[tuple[ra.Expr, bool]] = [(root, False)]
    while stack:
        expr, ready = stack.pop()
        if id(expr) in done:
            continue
        assert isinstance(expr, (ra.Join, ra.SemiJoin))
        if not ready:
            stack.extend([(expr, True), (expr.right, False), (expr.left, False)])
            continue
        done[id(expr)] = replace(expr, left=done[id(expr.left)], right=done[id(expr.right)])
    return done[id(root)]


def _with_children(expr: ra.Expr, new: dict[int, ra.Expr]) -> ra.Expr:
    """`expr` with each direct child c replaced by new[id(c)] (the same object when none
    changed)."""
    if isinstance(expr, ra.CidExtend) or all(new[id(c)] is c for c in ra.children(expr)):
        return expr
    if isinstance(expr, (ra.Select, ra.Project, ra.Distinct)):
        return replace(expr, input=new[id(expr.input)])
    if isinstance(expr, (ra.AntiJoin, ra.Difference)):
        return replace(expr, left=new[id(expr.left)], right=new[id(expr.right)])
    if isinstance(expr, ra.Aggregate):
        return replace(expr, body=new[id(expr.body)], atom=new[id(expr.atom)])
    if isinstance(expr, ra.Union):
        return ra.Union(tuple(new[id(i)] for i in expr.inputs))
    if isinstance(expr, ra.MultiJoin):
        return replace(
            expr,
            atoms=tuple((new[id(e)], terms) for e, terms in expr.atoms),
            negated=tuple((new[id(e)], terms) for e, terms in expr.negated),
        )
    raise AssertionError(f"no rewrite of the children of {type(expr).__name__}")
