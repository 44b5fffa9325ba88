"""Random "web app" programs: views over chains and stars of joins, for the partial-state
invariant tests (test_partial_invariants.py).

random_programs.generate aims at the language (recursion, every aggregate, constraints) with
bodies of at most three atoms; these aim at the shapes a web application's views have and
key provenance has to trace through:

- chains `t0(x, y) ⋈ t1(y, z) ⋈ t2(z, w)` and stars (every atom joined to the first), of
  two to four atoms, sometimes joined on two columns at once, with constant selections and
  comparisons;
- views over views (a chain continued through a derived relation);
- unions of two such bodies of different shapes;
- negation of a source or of an earlier view, by one or two of the body's variables;
- count and sum aggregates over a source or an earlier view (a join body), grouped by a
  variable of the rule's body;
- heads that keep a random subset of the body's variables, so that a view looked up by
  random attributes is keyed by a join column, by a column of one side, by a subset or a
  superset of the join columns, or by an aggregate's result.

They are random_programs.Program values (so random_batch writes to them and clingo solves
them); every attribute is an int over random_programs.INT_DOMAIN.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from random_programs import INT_DOMAIN, Agg, Atom, Cmp, Literal, Neg, Pos, Program, Rule, Term, Var

ATTRIBUTES = ("id", "ref", "val")
SHAPES = ("chain", "star", "tree")


class _Web:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sources: dict[str, tuple[tuple[str, str], ...]] = {}
        self.derived: dict[str, tuple[tuple[str, str], ...]] = {}
        self.rules: list[Rule] = []

    def attrs(self, relation: str) -> list[str]:
        schema = self.sources.get(relation) or self.derived[relation]
        return [a for a, _ in schema]

    def body(
        self, over: list[str], n_atoms: int, shape: str, fresh: Iterator[str]
    ) -> tuple[list[Literal], list[str]]:
        """A conjunctive body of `n_atoms` atoms over `over`, joined as `shape`; returns it and
        the variables it binds (at least one), in order of appearance."""
        while True:
            body, bound = self._body(over, n_atoms, shape, fresh)
            if bound:
                return body, bound

    def _body(
        self, over: list[str], n_atoms: int, shape: str, fresh: Iterator[str]
    ) -> tuple[list[Literal], list[str]]:
        rng = self.rng
        atoms: list[dict[str, Term]] = []
        relations: list[str] = []
        for i in range(n_atoms):
            relation = rng.choice(over)
            attrs = self.attrs(relation)
            args: dict[str, Term] = {}
            if i > 0:
                with_vars = [k for k, a in enumerate(atoms) if any(isinstance(t, Var) for t in a.values())]
                if not with_vars:
                    break
                anchor = {"chain": with_vars[-1], "star": with_vars[0]}.get(shape, rng.choice(with_vars))
                anchor_vars = [t for t in atoms[anchor].values() if isinstance(t, Var)]
                # one join column, sometimes two (a composite join key)
                n_join = min(len(attrs), len(anchor_vars), 2 if rng.random() < 0.2 else 1)
                for attr, var in zip(rng.sample(attrs, n_join), rng.sample(anchor_vars, n_join), strict=True):
                    args[attr] = var
            for attr in attrs:
                if attr in args:
                    continue
                roll = rng.random()
                if roll < 0.08:
                    args[attr] = rng.choice(INT_DOMAIN)  # a constant selection
                elif roll < 0.18 and args:
                    continue  # not mentioned: any value
                else:
                    args[attr] = Var(next(fresh))
            atoms.append(args)
            relations.append(relation)
        body: list[Literal] = [
            Pos(Atom(rel, tuple(args.items()))) for rel, args in zip(relations, atoms, strict=True)
        ]
        bound = list(dict.fromkeys(v for lit in body if isinstance(lit, Pos) for v in lit.variables()))
        if bound and rng.random() < 0.2:
            body.append(Cmp(Var(rng.choice(bound)), rng.choice(("<", ">=", "!=")), rng.choice((1, 2, 3))))
        return body, bound

    def declare(self, name: str, arity: int) -> None:
        self.derived[name] = tuple((f"h{i}", "int") for i in range(arity))

    def head(self, name: str, values: list[Term], body: list[Literal]) -> None:
        attrs = [a for a, _ in self.derived[name]]
        self.rules.append(Rule(name, tuple(zip(attrs, values, strict=True)), tuple(body)))

    def pick_head(self, bound: list[str], most: int = 4) -> list[Term]:
        k = self.rng.randint(1, min(most, len(bound)))
        return [Var(v) for v in self.rng.sample(bound, k)]

    def negation(self, bound: list[str], lower: list[str]) -> Neg:
        """`!rel(...)` by one or two of the body's variables (and rarely a constant)."""
        rng = self.rng
        relation = rng.choice(lower)
        attrs = self.attrs(relation)
        n = rng.randint(1, min(2, len(attrs), len(bound)))
        args: list[tuple[str, Term]] = [
            (a, Var(v)) for a, v in zip(rng.sample(attrs, n), rng.sample(bound, n), strict=True)
        ]
        rest = [a for a in attrs if a not in dict(args)]
        if rest and rng.random() < 0.2:
            args.append((rng.choice(rest), rng.choice(INT_DOMAIN)))
        return Neg(Atom(relation, tuple(args)))

    def aggregate(self, group: str, lower: list[str]) -> Agg:
        """`N := count : rel(a: G)` or `N := sum V : rel(a: G, b: V)`: grouped by `group`."""
        rng = self.rng
        relation = rng.choice(lower)
        attrs = self.attrs(relation)
        by = rng.choice(attrs)
        others = [a for a in attrs if a != by]
        if others and rng.random() < 0.5:
            value = rng.choice(others)
            return Agg("N", "sum", "V", Atom(relation, ((by, Var(group)), (value, Var("V")))))
        args: list[tuple[str, Term]] = [(by, Var(group))]
        if others and rng.random() < 0.3:
            args.append((rng.choice(others), Var("L")))  # a local: counts distinct tuples
        return Agg("N", "count", None, Atom(relation, tuple(args)))


def generate_web(rng: random.Random) -> Program:
    """A random web-app program (see the module docstring): 3-4 sources, 3-5 views."""
    w = _Web(rng)
    for i in range(rng.randint(3, 4)):
        w.sources[f"t{i}"] = tuple((a, "int") for a in ATTRIBUTES[: rng.choice((2, 2, 3))])
    sources = list(w.sources)
    levels: list[list[str]] = []
    for v in range(rng.randint(3, 5)):
        name = f"v{v}"
        fresh = (f"X{i}" for i in itertools.count())
        lower = sources + [d for level in levels for d in level]
        kind = rng.choice(("chain", "star", "over_view", "union", "negation", "aggregate"))
        if kind == "over_view" and not levels:
            kind = "chain"
        head: list[Term]
        if kind in ("chain", "star"):
            body, bound = w.body(sources, rng.randint(2, 4), kind, fresh)
            head = w.pick_head(bound)
            w.declare(name, len(head))
            w.head(name, head, body)
        elif kind == "over_view":
            view = rng.choice(lower[len(sources):])
            body, bound = w.body([view], 1, "chain", fresh)
            more, _ = w.body(sources, rng.randint(1, 2), "chain", fresh)
            # continue the chain: the first source atom joins the view's atom on one variable
            first = more[0]
            assert isinstance(first, Pos)
            attr = rng.choice([a for a, _ in first.atom.args] or w.attrs(first.atom.relation))
            args = dict(first.atom.args)
            old = args.get(attr)
            args[attr] = Var(rng.choice(bound))
            more[0] = Pos(Atom(first.atom.relation, tuple(args.items())))
            if isinstance(old, Var):  # the replaced variable may join later atoms: keep it bound
                more = [_rename(lit, old.name, args[attr]) for lit in more]
            body += more
            bound = list(dict.fromkeys(v for lit in body if isinstance(lit, Pos) for v in lit.variables()))
            head = w.pick_head(bound)
            w.declare(name, len(head))
            w.head(name, head, body)
        elif kind == "union":
            body1, bound1 = w.body(sources, rng.randint(1, 3), rng.choice(SHAPES), fresh)
            body2, bound2 = w.body(lower, rng.randint(1, 3), rng.choice(SHAPES), fresh)
            arity = rng.randint(1, min(3, len(bound1), len(bound2)))
            w.declare(name, arity)
            w.head(name, [Var(x) for x in rng.sample(bound1, arity)], body1)
            w.head(name, [Var(x) for x in rng.sample(bound2, arity)], body2)
        elif kind == "negation":
            body, bound = w.body(sources, rng.randint(1, 3), rng.choice(SHAPES), fresh)
            body.append(w.negation(bound, lower))
            head = w.pick_head(bound)
            w.declare(name, len(head))
            w.head(name, head, body)
        else:
            body, bound = w.body(sources, rng.randint(1, 2), rng.choice(SHAPES), fresh)
            group = rng.choice(bound)
            body.append(w.aggregate(group, lower))
            if rng.random() < 0.2:
                body.append(Cmp(Var("N"), ">", rng.choice((0, 1, 2))))
            grouped = [group, *rng.sample(bound, rng.randint(0, min(2, len(bound))))]
            head = [Var(x) for x in dict.fromkeys(grouped)]
            head.insert(rng.randint(0, len(head)), Var("N"))
            w.declare(name, len(head))
            w.head(name, head, body)
        levels.append([name])
    return Program(w.sources, w.derived, levels, w.rules)


def _rename(lit: Literal, old: str, new: Term) -> Literal:
    if isinstance(lit, Cmp):
        return Cmp(new if lit.lhs == Var(old) else lit.lhs, lit.op, lit.rhs)
    if not isinstance(lit, Pos):
        return lit
    args = tuple((a, new if isinstance(t, Var) and t.name == old else t) for a, t in lit.atom.args)
    return Pos(Atom(lit.atom.relation, args), lit.cid)
