"""Random programs with cyclic rule bodies: triangles and 4-cycles for planner/ir/cyclic.py's
MultiJoin (a WcojJoin, dataflow/operators/wcoj.py), run by test_cyclic_oracle.py (the Engine
against clingo) and test_cyclic_partial.py (partial state against the fully materialized run).

A family of its own beside random_programs.generate, whose programs (and every existing
seed's) stay as they were. Its programs are random_programs.Program values, so that
random_batch writes to them, clingo solves them and the naive evaluator checks the
translation. By construction:

- 2-3 sources of two or three attributes, ints over INT_DOMAIN (a three-attribute source may
  have a string third attribute);
- levels of derived relations, dependencies first: sometimes a plain relation or a
  transitive closure (recursive: its rules stay binary joins) with two or three int
  attributes, to be read as an edge relation; one or two *cyclic* relations, each with one or
  two rules of which the first has a cyclic body; sometimes a relation over them (a plain
  rule negating or joining them, or another cyclic body reading them as edges);
- a cyclic body: a triangle (AB BC CA), a 4-cycle (AB BC CD DA), a 4-cycle with a chord
  (two triangles) or a 4-clique over the int variables A-D, each edge an atom of a source or
  of a lower derived relation (one relation for every edge about half the time), the edge's
  two variables on two of its int attributes in either order; its other attributes left out,
  bound to a constant, to a fresh variable (E, F, or S for a string) or, rarely, to another
  variable of the cycle (a repeated variable, or an atom holding three of them); sometimes a
  pendant atom on one variable, or an atom of constants only (a guard); comparisons between
  the cycle's variables and with constants (on either side); negated atoms of lower relations
  over the body's variables, constants and left-out attributes; the literals shuffled;
  sometimes a count or sum aggregate grouped by a cycle variable;
- sometimes a recursive relation on top: the transitive closure of an edge relation from
  the edges of a cyclic one (its adorned copy, for a lookup by key, a MultiJoin with the
  magic guard as an atom and sources sliced by demand as others), and
  sometimes a triangle through the recursive relation itself (a NestedWcoj in the loop)
  or a triangle of lower relations in its recursive rule (a MultiJoin outside the loop);
  its readers by key are demand-driven (planner/demand/), the cyclic bodies below reached
  by the magic rewrite;
- with `temporal`: a transient source of events and a state relation defined by inductive
  (`@next`) rules only, one of them cyclic over every relation (events too); sometimes a
  cyclic inductive rule for another relation;
- sometimes a twin: a relation of its own whose rule is a cyclic rule's with its variables
  named apart (`AA` for `A`), which the cyclic pass shares under a renaming Project;
- range restricted: head, negation and comparison variables are bound by positive atoms.

Variables are typed by name as in random_programs (A-F int, S string).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from random_programs import (
    INT_DOMAIN,
    OPS,
    STR_DOMAIN,
    Agg,
    Atom,
    Batch,
    Cmp,
    Literal,
    Neg,
    Pos,
    Program,
    Rule,
    Schema,
    Store,
    Term,
    Var,
    source_rows,
    var_type,
)

# The edges of each cyclic shape, over the variables A-D (each is not α-acyclic).
SHAPES: dict[str, tuple[str, ...]] = {
    "triangle": ("AB", "BC", "CA"),
    "4-cycle": ("AB", "BC", "CD", "DA"),
    "4-cycle with a chord": ("AB", "BC", "CD", "DA", "AC"),
    "4-clique": ("AB", "AC", "AD", "BC", "BD", "CD"),
}
SHAPE_WEIGHTS = (6, 5, 2, 1)
EXTRA_INT_VARS = ("E", "F")  # an edge atom's other attributes, bound by that atom alone


@dataclass
class _Cyclic:
    rng: random.Random
    sources: Schema = field(default_factory=dict)
    derived: Schema = field(default_factory=dict)

    def schema(self, relation: str) -> tuple[tuple[str, str], ...]:
        return self.sources[relation] if relation in self.sources else self.derived[relation]

    def ints(self, relation: str) -> list[str]:
        return [a for a, t in self.schema(relation) if t == "int"]

    def constant(self, type_: str) -> int | str:
        return self.rng.choice(STR_DOMAIN if type_ == "string" else INT_DOMAIN)

    def edge_atom(self, relation: str, u: str, v: str, cycle: list[str]) -> Atom:
        """`relation`'s atom with `u` and `v` on two of its int attributes, the others left
        out, constants or other variables (see the module docstring)."""
        rng = self.rng
        first, second = rng.sample(self.ints(relation), 2)
        args: list[tuple[str, Term]] = [(first, Var(u)), (second, Var(v))]
        for attr, type_ in self.schema(relation):
            if attr in (first, second):
                continue
            roll = rng.random()
            if roll < 0.35:
                continue  # left out
            if roll < 0.7:
                args.append((attr, self.constant(type_)))
            elif type_ == "string":
                args.append((attr, Var("S")))
            elif roll < 0.9:
                args.append((attr, Var(rng.choice(EXTRA_INT_VARS))))
            else:
                args.append((attr, Var(rng.choice(cycle))))  # repeated, or a third cycle variable
        rng.shuffle(args)
        return Atom(relation, tuple(args))

    def side_atom(self, relation: str, cycle: list[str], constants_only: bool) -> Atom:
        """A pendant atom (one cycle variable, the rest constants or left out), or a guard
        (constants only)."""
        rng = self.rng
        schema = list(self.schema(relation))
        args: list[tuple[str, Term]] = []
        if not constants_only:
            attr = rng.choice(self.ints(relation))
            args.append((attr, Var(rng.choice(cycle))))
            schema = [(a, t) for a, t in schema if a != attr]
        for attr, type_ in schema:
            if constants_only or rng.random() < 0.5:
                args.append((attr, self.constant(type_)))
        return Atom(relation, tuple(args))

    def comparisons(self, bound: list[str]) -> list[Literal]:
        rng = self.rng
        out: list[Literal] = []
        ints = [v for v in bound if var_type(v) == "int"]
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            lhs = rng.choice(ints)
            op = rng.choice(OPS + ("!=", "<", "<=", ">", ">="))  # == between variables less often
            others = [v for v in ints if v != lhs]
            if rng.random() < 0.65:
                out.append(Cmp(Var(lhs), op, Var(rng.choice(others))))
            elif rng.random() < 0.5:
                out.append(Cmp(Var(lhs), op, self.constant("int")))
            else:
                out.append(Cmp(self.constant("int"), op, Var(lhs)))  # a constant on the left
        if "S" in bound and rng.random() < 0.3:
            out.append(Cmp(Var("S"), rng.choice(OPS), self.constant("string")))
        return out

    def negation(self, relation: str, bound: list[str]) -> Neg:
        """`!relation(...)` over bound variables, constants and left-out attributes, with a
        variable at least (rarely none: a source negated whole, or by constants)."""
        rng = self.rng
        args: list[tuple[str, Term]] = []
        for attr, type_ in self.schema(relation):
            typed = [v for v in bound if var_type(v) == type_]
            roll = rng.random()
            if roll < 0.8 and typed:
                args.append((attr, Var(rng.choice(typed))))
            elif roll < 0.9:
                args.append((attr, self.constant(type_)))
        whole = relation in self.sources and rng.random() < 0.05
        if not whole and not any(isinstance(t, Var) for _, t in args):
            typed = [(a, t) for a, t in self.schema(relation) if any(var_type(v) == t for v in bound)]
            attr, type_ = rng.choice(typed)
            args = [(a, t) for a, t in args if a != attr]
            args.append((attr, Var(rng.choice([v for v in bound if var_type(v) == type_]))))
        return Neg(Atom(relation, tuple(args)))

    def cyclic_rule(self, head: str, edges: list[str], lower: list[str], first: str | None = None) -> Rule:
        """A rule for `head` whose body is a cyclic shape over `edges` (relations with two int
        attributes at least; the first edge's `first` when given), with negations over `lower`
        (see the module docstring)."""
        rng = self.rng
        shape = SHAPES[rng.choices(list(SHAPES), weights=SHAPE_WEIGHTS)[0]]
        cycle = sorted({v for edge in shape for v in edge})
        same = rng.choice(edges) if rng.random() < 0.5 else None
        body: list[Literal] = [
            Pos(self.edge_atom((first if k == 0 else None) or same or rng.choice(edges), e[0], e[1], cycle))
            for k, e in enumerate(shape)
        ]
        if rng.random() < 0.25:
            body.append(Pos(self.side_atom(rng.choice(edges), cycle, constants_only=False)))
        if rng.random() < 0.1:
            body.append(Pos(self.side_atom(rng.choice(list(self.sources)), cycle, constants_only=True)))
        bound = sorted({v for lit in body if isinstance(lit, Pos) for v in lit.variables()})
        body += self.comparisons(bound)
        for _ in range(rng.choice((0, 1, 1, 2))):
            body.append(self.negation(rng.choice(lower), bound))
        rng.shuffle(body)
        if rng.random() < 0.15:
            body.append(self.aggregate(rng.choice(edges), cycle))
            bound.append("N0")
        return Rule(head, self.head_args(head, bound, cycle), tuple(body))

    def aggregate(self, relation: str, cycle: list[str]) -> Agg:
        """`N0 := count : r(x: A)` or `N0 := sum V : r(x: A, y: V)`, grouped by a cycle
        variable (above the MultiJoin, as lowering puts it)."""
        rng = self.rng
        group, value = rng.sample(self.ints(relation), 2)
        if rng.random() < 0.5:
            return Agg("N0", "count", None, Atom(relation, ((group, Var(rng.choice(cycle))),)))
        atom = Atom(relation, ((group, Var(rng.choice(cycle))), (value, Var("V"))))
        return Agg("N0", "sum", "V", atom)

    def head_args(self, head: str, bound: list[str], cycle: list[str]) -> tuple[tuple[str, Term], ...]:
        """Mostly the cycle's variables (each at most once, when it can), else any bound
        variable of the attribute's type, or a constant."""
        rng = self.rng
        unused = list(cycle)
        rng.shuffle(unused)
        args: list[tuple[str, Term]] = []
        for attr, type_ in self.schema(head):
            typed = [v for v in bound if var_type(v) == type_]
            if type_ == "int" and unused and rng.random() < 0.9:
                args.append((attr, Var(unused.pop())))
            elif typed and rng.random() < 0.85:
                args.append((attr, Var(rng.choice(typed))))
            else:
                args.append((attr, self.constant(type_)))
        rng.shuffle(args)
        return tuple(args)

    def plain_rule(self, head: str, over: list[str]) -> Rule:
        """`head(...) :- r(...)`, r's int attributes onto the head's, sometimes with a
        constant selection (an edge relation derived from another)."""
        rng = self.rng
        relation = rng.choice([r for r in over if len(self.ints(r)) >= 2])
        heads = self.ints(head)
        picked = rng.sample(self.ints(relation), min(len(heads), len(self.ints(relation))))
        variables = ["A", "B", "C"][: len(picked)]
        args: list[tuple[str, Term]] = [(a, Var(v)) for a, v in zip(picked, variables, strict=False)]
        for attr, type_ in self.schema(relation):
            if attr not in picked and rng.random() < 0.3:
                args.append((attr, self.constant(type_)))
        head_args = [(h, Var(variables[i]) if i < len(variables) else 0) for i, h in enumerate(heads)]
        return Rule(head, tuple(head_args), (Pos(Atom(relation, tuple(args))),))

    def recursive_cyclic_rule(self, head: str, edges: list[str], lower: list[str]) -> Rule:
        """`head(A, C) :- head(A, B), e1(B, C), e2(A, C), ...`: a triangle through the
        recursive relation itself (a NestedWcoj in its loop); or, half the time,
        `head(A, C) :- head(A, B), e1(B, C), e2(C, D), e3(B, D), ...`: a triangle of lower
        relations in the recursive rule (a MultiJoin outside the loop)."""
        rng = self.rng
        h0, h1 = self.ints(head)[:2]
        body: list[Literal] = [Pos(Atom(head, ((h0, Var("A")), (h1, Var("B")))))]
        if rng.random() < 0.5:
            body += [Pos(self.edge_atom(rng.choice(edges), u, v, ["A", "B", "C"])) for u, v in ("BC", "AC")]
        else:
            triangle = ("BC", "CD", "BD")
            body += [Pos(self.edge_atom(rng.choice(edges), u, v, ["B", "C", "D"])) for u, v in triangle]
        bound = sorted({v for lit in body if isinstance(lit, Pos) for v in lit.variables()})
        body += self.comparisons(bound)[:1]
        if rng.random() < 0.5:
            body.append(self.negation(rng.choice(lower), bound))
        rng.shuffle(body)
        return Rule(head, ((h0, Var("A")), (h1, Var("C"))), tuple(body))

    def closure(self, head: str, over: str, start: str | None = None) -> list[Rule]:
        """A transitive closure of `over`, from the edges of `start` (by default `over`)
        (a recursive level: binary joins only)."""
        rng = self.rng
        x, y = rng.sample(self.ints(over), 2)
        x0, y0 = rng.sample(self.ints(start), 2) if start else (x, y)
        h0, h1 = self.ints(head)[:2]
        base = Pos(Atom(start or over, ((x0, Var("A")), (y0, Var("B")))))
        step = Pos(Atom(over, ((x, Var("B")), (y, Var("C")))))
        reached = Pos(Atom(head, ((h0, Var("A")), (h1, Var("B")))))
        return [
            Rule(head, ((h0, Var("A")), (h1, Var("B"))), (base,)),
            Rule(head, ((h0, Var("A")), (h1, Var("C"))), (reached, step)),
        ]


def _declare(g: _Cyclic, name: str, arity: int) -> None:
    g.derived[name] = tuple((f"h{i}", "int") for i in range(arity))


def generate_cyclic(rng: random.Random, temporal: bool = False) -> Program:
    """A random valid program with cyclic rule bodies (see the module docstring); with
    `temporal`, time too (a transient source and inductive rules, see `_time`)."""
    g = _Cyclic(rng)
    for i in range(rng.randint(2, 3)):
        width = rng.choice((2, 2, 3))
        types = ["int"] * width
        if width == 3 and rng.random() < 0.3:
            types[2] = "string"
        g.sources[f"s{i}"] = tuple(zip(("x", "y", "z"), types, strict=False))
    levels: list[list[str]] = []
    rules: list[Rule] = []
    names = (f"d{i}" for i in range(100))
    transient = _time(g, levels, rules) if temporal else ""
    roll = rng.random()
    if roll < 0.45:  # an edge relation derived from a source: plain or a closure
        name = next(names)
        _declare(g, name, rng.choice((2, 2, 3)) if roll < 0.3 else 2)
        if roll < 0.3:
            rules += [g.plain_rule(name, list(g.sources)) for _ in range(rng.choice((1, 1, 2)))]
        else:
            rules += g.closure(name, rng.choice([s for s in g.sources if len(g.ints(s)) >= 2]))
        levels.append([name])
    for _ in range(rng.choice((1, 1, 2))):
        name = next(names)
        _declare(g, name, rng.choice((1, 2, 2, 3, 3)))
        lower, edges = _below(g, levels)
        rules.append(g.cyclic_rule(name, edges, lower))
        if rng.random() < 0.35:
            other = g.cyclic_rule(name, edges, lower) if rng.random() < 0.5 else g.plain_rule(name, lower)
            rules.append(other)
        levels.append([name])
    if rng.random() < 0.4:
        name = next(names)
        _declare(g, name, rng.choice((2, 3)))
        lower, edges = _below(g, levels)
        # A cyclic body over the cyclic relations, or negating one of them.
        rules.append(g.cyclic_rule(name, edges, lower))
        levels.append([name])
    if rng.random() < 0.3:
        name = next(names)
        _declare(g, name, 2)
        lower, edges = _below(g, levels)
        cyclic = [d for d in edges if d in g.derived] or edges
        # From a cyclic relation: a lookup by h0 demands it by its first attribute outside the
        # recursion (its adorned copy a MultiJoin with the magic guard as an atom).
        rules += g.closure(name, rng.choice(edges if rng.random() < 0.5 else cyclic), rng.choice(cyclic))
        if rng.random() < 0.5:
            rules.append(g.recursive_cyclic_rule(name, edges, lower))
        levels.append([name])
    if temporal:
        everything, edges = _below(g, levels)
        heads = ["t0"] + ([rng.choice(levels[-1])] if rng.random() < 0.5 else [])
        # An inductive rule reads the events positively (or it could change its head forever).
        for head in heads:
            rules.append(replace(g.cyclic_rule(head, edges, everything, transient), inductive=True))
    _twin(g, levels, rules)
    return Program(g.sources, g.derived, levels, rules, transient=frozenset({transient} - {""}))


TWIN = "d99"


def _twin(g: _Cyclic, levels: list[list[str]], rules: list[Rule]) -> None:
    """Sometimes a relation of its own whose one rule is a cyclic rule's with every variable
    named apart (the cyclic pass shares their MultiJoin under a renaming Project). Drawn from a
    generator seeded by the rules, not from `g.rng`: the programs and draws of the seeds
    without a twin stay as they were."""
    rng = random.Random(repr(rules))
    # A rule of three positive atoms or more none of which reads its head (not recursive).
    cyclic = [
        r
        for r in rules
        if not r.inductive
        and sum(isinstance(lit, Pos) for lit in r.body) >= 3
        and not any(isinstance(lit, Pos) and lit.atom.relation == r.head for lit in r.body)
    ]
    if not cyclic or rng.random() >= 0.3:
        return
    rule = rng.choice(cyclic)
    g.derived[TWIN] = g.derived[rule.head]
    head = tuple((a, _apart(t)) for a, t in rule.head_args)
    rules.append(Rule(TWIN, head, tuple(map(_apart_literal, rule.body))))
    levels.append([TWIN])


def _apart(term: Term) -> Term:
    """A variable named apart, its type kept (variables are typed by their first letter)."""
    return Var(term.name[0] + term.name) if isinstance(term, Var) else term


def _apart_atom(atom: Atom) -> Atom:
    return Atom(atom.relation, tuple((a, _apart(t)) for a, t in atom.args))


def _apart_literal(lit: Literal) -> Literal:
    if isinstance(lit, Pos):
        return Pos(_apart_atom(lit.atom), None if lit.cid is None else lit.cid[0] + lit.cid)
    if isinstance(lit, Neg):
        return Neg(_apart_atom(lit.atom))
    if isinstance(lit, Cmp):
        return Cmp(_apart(lit.lhs), lit.op, _apart(lit.rhs))
    value = None if lit.value is None else lit.value[0] + lit.value
    return Agg(lit.result[0] + lit.result, lit.function, value, _apart_atom(lit.atom))


def _below(g: _Cyclic, levels: list[list[str]]) -> tuple[list[str], list[str]]:
    """The relations a new level may read (sources and the levels so far), and those of them
    with two int attributes at least (edges)."""
    lower = list(g.sources) + [d for level in levels for d in level]
    return lower, [r for r in lower if len(g.ints(r)) >= 2]


def _time(g: _Cyclic, levels: list[list[str]], rules: list[Rule]) -> str:
    """Time (§2.1): a transient source of events, and a state relation t0 on the first level
    (so that every other relation may read it, as an edge too) defined by inductive rules
    only: one carrying its rows, unless a source has a row of them, one adding the events,
    and (added at the end) a cyclic body over every relation, its first edge the events.
    Returns the transient source."""
    event = f"s{len(g.sources)}"
    g.sources[event] = (("x", "int"), ("y", "int"))
    _declare(g, "t0", 2)
    levels.append(["t0"])
    carried = Pos(Atom("t0", (("h0", Var("A")), ("h1", Var("B")))))
    body: list[Literal] = [carried]
    if g.rng.random() < 0.7:
        source = g.rng.choice([s for s in g.sources if s != event and len(g.ints(s)) >= 2])
        x, y = g.rng.sample(g.ints(source), 2)
        body.append(Neg(Atom(source, ((x, Var("A")), (y, Var("B"))))))
    rules.append(Rule("t0", carried.atom.args, tuple(body), inductive=True))
    events = Pos(Atom(event, (("x", Var("A")), ("y", Var("B")))))
    rules.append(Rule("t0", carried.atom.args, (events,), inductive=True))
    return event


def cyclic_batch(rng: random.Random, program: Program, store: Store, first: bool) -> Batch:
    """A write batch dense enough for cycles: the first inserts a quarter to a half of each
    source's rows (INT_DOMAIN: 25 or 125); later ones insert, re-insert, delete present rows
    and absent ones (no-ops), and sometimes delete half of a source at once."""
    batch: Batch = {}
    for s in program.sources:
        rows = source_rows(program, s)
        present = sorted(store[s])
        if s in program.transient:  # events: this batch's inserts are the relation
            batch[s] = {rng.choice(rows): 1 for _ in range(rng.randint(2, 8))}
            continue
        if first:
            batch[s] = {rng.choice(rows): 1 for _ in range(rng.randint(len(rows) // 4, len(rows) // 2))}
            continue
        if rng.random() < 0.25:
            continue
        ops: dict[tuple, int] = {}
        if present and rng.random() < 0.1:
            ops.update(dict.fromkeys(rng.sample(present, len(present) // 2), -1))
        for _ in range(rng.randint(1, len(rows) // 4)):
            roll = rng.random()
            if roll < 0.3 and present:
                ops[rng.choice(present)] = -1
            elif roll < 0.4 and present:
                ops[rng.choice(present)] = 1  # a no-op insert
            else:
                ops[rng.choice(rows)] = 1 if rng.random() < 0.8 else -1
        batch[s] = ops
    return batch
