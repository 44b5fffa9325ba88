"""Random stratified PomoLogic programs, their clingo translation, and a naive evaluator.

Used by test_engine_oracle.py (the Engine against clingo). Programs are built
by construction so that they are valid:

- relations live on *levels* (one level = one intended stratum: a plain
  relation, a self-recursive one, or two or three mutually recursive ones); positive
  edges go to the same or a lower level, negative and aggregate edges only to
  strictly lower levels, so every program is stratified;
- every head, negation and constraint variable is bound by a positive atom (or
  is an aggregate's result), so rules are range restricted and grounded;
- variables are typed by name (A-D int, S and T string), constants by their
  attribute's type, so there are no type clashes;
- an aggregate's atom binds its own locals (V, L, M, Q), which appear nowhere
  else in the rule (they do not escape), and its value variable appears once.

Semantics (DESIGN §2) as clingo computes them: relations are sets; an
aggregate ranges over the distinct whole tuples of its relation that match its
atom (unmentioned attributes included), with grouping variables bound outside;
count/sum of an empty group are 0; min/max of an empty group give no result.
The clingo translation is the one of test_oracle_clingo.py (positional
arguments in declaration order, `#agg{ V, t1..tn : rel(t1..tn) }`, locals
renamed per aggregate, `N < #sup` / `N > #inf` guards for min/max), extended
with strings and negation (`not rel(X, _)`).

With `generate(..., temporal=True)` programs also have time (§2.1): a
transient source, and inductive rules (see `generate`). Epoch t is then solved
on its own: p(t) = p's deductive rules at t ∪ what p's inductive rules derived
at t-1 (`p__next` facts in clingo), and a transient source holds the inserts of
the batch of epoch t only (`solve_epochs`).

`evaluate` is an independent naive bottom-up evaluator of the same programs;
the tests compare it with clingo, which checks the translation.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace

import clingo

INT_DOMAIN = (0, 1, 2, 3, 4)
STR_DOMAIN = ("a", "b", "c")
OPS = ("==", "!=", "<", "<=", ">", ">=")
INT_VARS = ("A", "B", "C", "D")
STR_VARS = ("S", "T")
# Locals of aggregates, by type; V is the aggregated value (int).
INT_LOCALS = ("L", "M")
STR_LOCALS = ("Q",)

Value = int | str


@dataclass(frozen=True)
class Var:
    name: str


Term = Var | int | str


def term_text(term: Term) -> str:
    if isinstance(term, Var):
        return term.name
    if isinstance(term, str):
        return f'"{term}"'
    return str(term)


CID_VARS = ("K0", "K1", "K2")  # content ids (§2.2): `K0 := rel(...)`, or an attribute of type cid


def var_type(name: str) -> str:
    """Variables are typed by their name (see the module docstring)."""
    if name[0] == "K":
        return "cid"
    return "string" if name[0] in "STQ" else "int"


@dataclass(frozen=True)
class Atom:
    relation: str
    args: tuple[tuple[str, Term], ...]  # (attribute, term), in text order

    def text(self) -> str:
        return f"{self.relation}({', '.join(f'{a}: {term_text(t)}' for a, t in self.args)})"

    def variables(self) -> list[str]:
        return [t.name for _, t in self.args if isinstance(t, Var)]


@dataclass(frozen=True)
class Pos:
    atom: Atom
    cid: str | None = None  # `cid := atom`: binds (or, bound already, filters by) the tuple's CID

    def variables(self) -> list[str]:
        return self.atom.variables() + ([self.cid] if self.cid else [])


@dataclass(frozen=True)
class Neg:
    atom: Atom


@dataclass(frozen=True)
class Cmp:
    lhs: Term
    op: str
    rhs: Term


@dataclass(frozen=True)
class Agg:
    result: str
    function: str  # count | sum | min | max
    value: str | None  # the aggregated variable (None for count)
    atom: Atom


Literal = Pos | Neg | Cmp | Agg


def literal_text(lit: Literal) -> str:
    if isinstance(lit, Pos):
        return (f"{lit.cid} := " if lit.cid else "") + lit.atom.text()
    if isinstance(lit, Neg):
        return "!" + lit.atom.text()
    if isinstance(lit, Cmp):
        return f"{term_text(lit.lhs)} {lit.op} {term_text(lit.rhs)}"
    value = f" {lit.value}" if lit.value else ""
    return f"{lit.result} := {lit.function}{value} : {lit.atom.text()}"


@dataclass(frozen=True)
class Rule:
    head: str
    head_args: tuple[tuple[str, Term], ...]
    body: tuple[Literal, ...] = ()
    inductive: bool = False  # head@next: derives into the next epoch

    def text(self) -> str:
        head = Atom(self.head, self.head_args).text() + ("@next" if self.inductive else "")
        if not self.body:
            return f"{head}."
        return f"{head} :- {', '.join(literal_text(lit) for lit in self.body)}."

    def outer_variables(self) -> set[str]:
        """Variables bound outside aggregates: by positive atoms, and aggregates' results."""
        out = {v for lit in self.body if isinstance(lit, Pos) for v in lit.variables()}
        return out | {lit.result for lit in self.body if isinstance(lit, Agg)}


Schema = dict[str, tuple[tuple[str, str], ...]]  # relation -> ((attribute, type), ...)


@dataclass
class Program:
    sources: Schema
    derived: Schema
    levels: list[list[str]]  # derived relations per intended stratum, dependencies first
    rules: list[Rule]
    extra_text: str = ""  # appended verbatim to pomo() (invalid programs only)
    transient: frozenset[str] = frozenset()  # transient sources: a batch's inserts, for one epoch

    def inductive_heads(self) -> list[str]:
        return sorted({rule.head for rule in self.rules if rule.inductive})

    def schema(self, relation: str) -> tuple[tuple[str, str], ...]:
        return self.sources[relation] if relation in self.sources else self.derived[relation]

    def attributes(self, relation: str) -> list[str]:
        return [a for a, _ in self.schema(relation)]

    def relations(self) -> list[str]:
        return list(self.sources) + list(self.derived)

    def pomo(self) -> str:
        lines = [
            f"{'transient ' if s in self.transient else ''}source {s}"
            f"({', '.join(f'{a}: {t}' for a, t in attrs)})."
            for s, attrs in self.sources.items()
        ]
        lines += [rule.text() for rule in self.rules]
        return "\n".join(lines) + "\n" + self.extra_text

    def clingo(self) -> str:
        """Positional predicates, attributes in declaration order (derived: `derived`'s order).

        One epoch of time (§2.1): an inductive rule for p derives `p__ind` (what p gets at the
        next epoch), and p gets the facts `p__next` (what the inductive rules derived at the
        previous epoch), which the caller supplies.
        """
        out = "".join(self._clingo_rule(rule) + "\n" for rule in self.rules)
        for p in self.inductive_heads():
            args = [f"X{i}" for i in range(len(self.attributes(p)))]
            if args:
                out += f"{p}({', '.join(args)}) :- {p}__next({', '.join(args)}).\n"
            else:
                out += f"{p} :- {p}__next.\n"
        return out

    def _positional(self, atom: Atom, missing: Iterator[str] | None) -> list[str]:
        by_attr = dict(atom.args)
        out: list[str] = []
        for attr in self.attributes(atom.relation):
            if attr in by_attr:
                out.append(term_text(by_attr[attr]))
            else:
                out.append("_" if missing is None else next(missing))
        return out

    def _clingo_atom(self, atom: Atom, missing: Iterator[str] | None = None) -> str:
        args = self._positional(atom, missing)
        return f"{atom.relation}({', '.join(args)})" if args else atom.relation

    def _clingo_rule(self, rule: Rule) -> str:
        by_attr = dict(rule.head_args)
        head_atom = Atom(rule.head, tuple((a, by_attr[a]) for a in self.attributes(rule.head)))
        head = self._clingo_atom(head_atom)
        if rule.inductive:
            head = rule.head + "__ind" + head[len(rule.head) :]
        outer = rule.outer_variables()
        fresh = (f"W{i}" for i in itertools.count())
        body: list[str] = []
        late: list[str] = []
        for k, lit in enumerate(rule.body):
            if isinstance(lit, Pos) and lit.cid:
                # the CID as the term k_rel(all attributes): equal exactly for equal tuples
                terms = self._positional(lit.atom, fresh)
                body.append(f"{lit.atom.relation}({', '.join(terms)})" if terms else lit.atom.relation)
                body.append(f"{lit.cid} = k_{lit.atom.relation}({', '.join(terms)})")
            elif isinstance(lit, Pos):
                body.append(self._clingo_atom(lit.atom))
            elif isinstance(lit, Neg):
                body.append("not " + self._clingo_atom(lit.atom))
            elif isinstance(lit, Cmp):
                op = "=" if lit.op == "==" else lit.op
                late.append(f"{term_text(lit.lhs)} {op} {term_text(lit.rhs)}")
            else:
                # locals get names of their own, so two aggregates never share one
                def local(t: Term, k: int = k) -> Term:
                    return Var(f"{t.name}_{k}") if isinstance(t, Var) and t.name not in outer else t

                atom = Atom(lit.atom.relation, tuple((a, local(t)) for a, t in lit.atom.args))
                terms = self._positional(atom, fresh)
                cond = f"{atom.relation}({', '.join(terms)})" if terms else atom.relation
                value = [f"{lit.value}_{k}"] if lit.value else []
                element = ", ".join(value + (terms or ["0"]))
                body.append(f"{lit.result} = #{lit.function}{{ {element} : {cond} }}")
                if lit.function == "min":
                    late.append(f"{lit.result} < #sup")  # clingo: min of {} is #sup
                if lit.function == "max":
                    late.append(f"{lit.result} > #inf")
        body += late
        return f"{head} :- {', '.join(body)}." if body else f"{head}."


# ---------------------------------------------------------------------------
# Generation


@dataclass
class _Gen:
    rng: random.Random
    sources: Schema = field(default_factory=dict)
    derived: Schema = field(default_factory=dict)
    cids: bool = False

    def schema(self, relation: str) -> tuple[tuple[str, str], ...]:
        return self.sources[relation] if relation in self.sources else self.derived[relation]

    def constant(self, type_: str) -> Value:
        assert type_ != "cid", "a cid has no literal"
        domain: tuple[Value, ...] = STR_DOMAIN if type_ == "string" else INT_DOMAIN
        return self.rng.choice(domain)

    def term(self, type_: str, pool: list[str], p_var: float) -> Term:
        """A variable of the type from `pool`, or a constant (a cid has no constants: a variable)."""
        typed = [v for v in pool if var_type(v) == type_]
        if typed and (type_ == "cid" or self.rng.random() < p_var):
            return Var(self.rng.choice(typed))
        return self.constant(type_)

    def atom(self, relation: str, pool: list[str], p_var: float = 0.8, min_args: int = 1) -> Atom:
        has_cid_var = any(var_type(v) == "cid" for v in pool)
        schema = [(a, t) for a, t in self.schema(relation) if t != "cid" or has_cid_var]
        n = self.rng.randint(min(min_args, len(schema)), len(schema)) if self.rng.random() < 0.95 else 0
        chosen = self.rng.sample(schema, n)
        return Atom(relation, tuple((a, self.term(t, pool, p_var)) for a, t in chosen))

    def _vars(self) -> list[str]:
        return (
            list(INT_VARS)
            + (list(STR_VARS) if self._strings() else [])
            + (list(CID_VARS) if self.cids else [])
        )

    def rule(
        self,
        head: str,
        positive: list[str],
        lower: list[str],
        required: list[Atom] | None = None,
        force_neg: str | None = None,
        force_agg: str | None = None,
        head_hint: dict[str, Term] | None = None,
    ) -> Rule:
        """One rule for `head`: positive atoms over `positive`, negations/aggregates over `lower`."""
        rng = self.rng
        all_vars = self._vars()
        body: list[Literal] = [Pos(a) for a in required or []]
        n_atoms = rng.choice((0, 1, 1, 1, 2, 2, 2, 3)) if not required else rng.choice((0, 1, 1, 2))
        if force_neg and not body:
            n_atoms = max(n_atoms, 1)
        for _ in range(n_atoms):
            body.append(Pos(self.atom(rng.choice(positive), all_vars, 0.85)))
        cid_head = any(t == "cid" and a not in (head_hint or {}) for a, t in self.derived[head])
        if self.cids and (rng.random() < 0.3 or cid_head):
            # K := rel(...): a fresh K binds the tuple's CID, a bound one selects the tuple. Never
            # over the head's own level: a recursive CID of a CID of ... would never terminate.
            rel = rng.choice(lower)
            body.append(Pos(self.atom(rel, all_vars, 0.85), rng.choice(CID_VARS)))
            if cid_head and not any(isinstance(x, Pos) and x.cid for x in body[:-1]) and rng.random() < 0.5:
                body.append(Pos(self.atom(rng.choice(lower), all_vars, 0.85), rng.choice(CID_VARS)))
        bound = sorted({v for lit in body if isinstance(lit, Pos) for v in lit.variables()})
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2))):
            if bound:
                lhs = rng.choice(bound)
                others = [v for v in bound if v != lhs]  # X < X and X != X only empty a rule
                if var_type(lhs) != "cid":
                    body.append(Cmp(Var(lhs), rng.choice(OPS), self.term(var_type(lhs), others, 0.4)))
                elif any(var_type(v) == "cid" for v in others):  # CIDs: equality only, no constants
                    body.append(Cmp(Var(lhs), rng.choice(("==", "!=")), self.term("cid", others, 1)))
        results: list[str] = []
        aggs = [rng.choice(lower) for _ in range(rng.choice((0, 0, 0, 1, 1, 2)))]
        if force_agg:
            aggs.append(force_agg)
        late: list[Literal] = []
        for k, rel in enumerate(aggs):
            agg = self.aggregate(k, rel, bound + results)
            body.append(agg)
            results.append(agg.result)
            if rng.random() < 0.25:
                type_ = var_type(agg.result)
                rhs = self.term(type_, bound, 0.3) if type_ == "string" else rng.choice((0, 1, 2, 3, 6))
                rhs = self.term(type_, bound, 0.3) if rng.random() < 0.3 else rhs
                late.append(Cmp(Var(agg.result), rng.choice(OPS), rhs))
        negs = [force_neg] if force_neg else [rng.choice(lower) for _ in range(rng.random() < 0.35)]
        for rel in negs:
            # grounded by the positive atoms (and rarely an aggregate's result)
            pool = bound + results if rng.random() < 0.2 else bound
            body.append(Neg(self.atom(rel, pool, 0.75, min_args=0 if rel in self.sources else 1)))
        body += late
        head_pool = bound + results
        attrs = list(self.derived[head])
        rng.shuffle(attrs)  # several rules of a head need not agree on the order
        hint = head_hint or {}
        head_args = tuple((a, hint[a] if a in hint else self.term(t, head_pool, 0.85)) for a, t in attrs)
        if rng.random() < 0.3:
            # The order of a body's literals must not matter (§2.4), except that the front end
            # wants an aggregate grouped by another's result after it: aggregates keep their order.
            in_order = iter([lit for lit in body if isinstance(lit, Agg)])
            rng.shuffle(body)
            body = [next(in_order) if isinstance(lit, Agg) else lit for lit in body]
        return Rule(head, head_args, tuple(body))

    def inductive(self, head: str, everything: list[str], event: str | None) -> Rule:
        """head@next :- ...: carries the head (event None) or reads the transient `event`."""
        pool = self._vars()
        if event is None:
            atom = Atom(head, tuple((a, self.term(t, pool, 0.9)) for a, t in self.derived[head]))
            rule = self.rule(head, everything, everything, [atom], head_hint=dict(atom.args))
        else:
            rule = self.rule(head, everything, everything, [self.atom(event, pool, 0.9)])
        return replace(rule, inductive=True)

    def aggregate(self, k: int, relation: str, outer: list[str]) -> Agg:
        """The k-th aggregate of a rule; its result is N<k> (int) or SN<k> (string: min/max of one)."""
        rng = self.rng
        schema = list(self.schema(relation))
        ints = [a for a, t in schema if t == "int"]
        strs = [a for a, t in schema if t == "string"]
        functions = (("sum",) if ints else ()) + (("min", "max") if ints or strs else ())
        function = rng.choice(("count", *functions))
        chosen = rng.sample(schema, rng.randint(1 if function != "count" else 0, len(schema)))
        value = None
        result = f"N{k}"
        if function != "count":
            on_string = function != "sum" and strs and (not ints or rng.random() < 0.3)
            value_attr = rng.choice(strs if on_string else ints)
            chosen = [(a, t) for a, t in chosen if a != value_attr]
            result = f"SN{k}" if on_string else result
        args: list[tuple[str, Term]] = []
        for attr, type_ in chosen:
            typed_outer = [v for v in outer if var_type(v) == type_]
            roll = rng.random()
            if roll < 0.45 and typed_outer:
                args.append((attr, Var(rng.choice(typed_outer))))  # a grouping variable
            elif roll < 0.8 or type_ == "cid":
                locals_ = {"string": STR_LOCALS, "cid": ("KL",)}.get(type_, INT_LOCALS)
                args.append((attr, Var(rng.choice(locals_))))
            else:
                args.append((attr, self.constant(type_)))
        if function != "count":
            value = "QV" if result.startswith("S") else "V"  # typed by name, as every variable
            args.insert(rng.randint(0, len(args)), (value_attr, Var(value)))
        return Agg(result, function, value, Atom(relation, tuple(args)))

    def _strings(self) -> bool:
        return any(t == "string" for attrs in self.sources.values() for _, t in attrs)

    def declare_derived(self, name: str) -> None:
        arity = (
            self.rng.choice((0, 1, 1, 2, 2, 2, 3))
            if self.rng.random() < 0.06
            else self.rng.choice((1, 2, 2, 3))
        )
        p_str = 0.2 if self._strings() else 0.0
        p_cid = 0.15 if self.cids else 0.0

        def type_() -> str:
            roll = self.rng.random()
            return "string" if roll < p_str else "cid" if roll < p_str + p_cid else "int"

        self.derived[name] = tuple((f"h{i}", type_()) for i in range(arity))

    def chain(self, head: str, rec: str, lower: list[str]) -> tuple[list[Atom], dict[str, Term]] | None:
        """A transitive-closure step head(A, C) :- rec(A, B), base(B, C), base one of `lower`."""
        rng = self.rng
        h_ints = [a for a, t in self.derived[head] if t == "int"]
        r_ints = [a for a, t in self.derived[rec] if t == "int"]
        bases = [b for b in lower if sum(t == "int" for _, t in self.schema(b)) >= 2]
        if len(h_ints) < 2 or len(r_ints) < 2 or not bases:
            return None
        base = rng.choice(bases)
        b_ints = [a for a, t in self.schema(base) if t == "int"]
        r1, r2 = rng.sample(r_ints, 2)
        b1, b2 = rng.sample(b_ints, 2)
        h1, h2 = rng.sample(h_ints, 2)
        atoms = [Atom(rec, ((r1, Var("A")), (r2, Var("B")))), Atom(base, ((b1, Var("B")), (b2, Var("C"))))]
        return atoms, {h1: Var("A"), h2: Var("C")}


def generate(rng: random.Random, max_levels: int = 4, temporal: bool = False, cids: bool = False) -> Program:
    """A random valid stratified program (see the module docstring) of 1..max_levels levels.

    `temporal` adds time (§2.1): a transient source (events), *state* relations
    defined by inductive rules only (put on the first level, so that every other
    relation may read them), and inductive rules for some other derived
    relations. An inductive rule either carries its head (the head atom repeated
    in the body with the same bindings, as the checkbox does) or reads the
    transient source positively; its body may read, negate and aggregate any
    relation, since time stratifies it.

    `cids` adds content ids (§2.2): `K := rel(...)` selections (binding a fresh
    K, or selecting the tuple whose CID a bound K is) and derived attributes of
    type cid, compared with == and != only.
    """
    g = _Gen(rng, cids=cids)
    n_sources = rng.randint(2, 3)
    for i in range(n_sources):
        attrs = ["x", "y", "z"][: rng.choice((1, 2, 2, 2, 3))]
        types = ["int"] * len(attrs)
        if i == n_sources - 1 and len(attrs) >= 2 and rng.random() < 0.35:
            types[rng.randrange(len(attrs))] = "string"
        g.sources[f"s{i}"] = tuple(zip(attrs, types, strict=True))
    levels: list[list[str]] = []
    rules: list[Rule] = []
    count = itertools.count()
    transient: list[str] = []
    states: list[str] = []
    if temporal:
        if rng.random() < 0.85:
            event = f"s{n_sources}"
            g.sources[event] = tuple((a, "int") for a in ["x", "y"][: rng.choice((1, 1, 2))])
            transient.append(event)
            states = [f"t{i}" for i in range(rng.choice((1, 1, 2)))]
            for name in states:
                g.declare_derived(name)
                levels.append([name])
    for _ in range(rng.randint(1, max_levels)):
        kind = rng.choices(("plain", "self", "mutual"), weights=(5, 3, 2))[0]
        size = rng.choice((2, 2, 2, 3)) if kind == "mutual" else 1
        names = [f"d{next(count)}" for _ in range(size)]
        for name in names:
            g.declare_derived(name)
        lower = list(g.sources) + [d for level in levels for d in level]
        for i, name in enumerate(names):
            for _ in range(rng.choice((1, 1, 2))):
                rules.append(g.rule(name, lower, lower))
            if rng.random() < 0.12 and all(t != "cid" for _, t in g.derived[name]):
                rules.append(_fact(g, name))
            if kind == "plain":
                continue
            partner = names[(i + 1) % len(names)]  # d_i uses d_i+1: a cycle through the level
            for j in range(rng.choice((1, 1, 2))):
                # the first recursive rule uses the partner, so the cycle is really there
                rec = partner if j == 0 else rng.choice(names)
                # linear (rec joined with a lower relation) or non-linear (with the level's own)
                chain = (
                    g.chain(name, rec, lower if rng.random() < 0.7 else names) if rng.random() < 0.5 else None
                )
                if chain is not None:
                    rules.append(g.rule(name, lower + names, lower, chain[0], head_hint=chain[1]))
                    continue
                pool = g._vars()
                rules.append(g.rule(name, lower + names, lower, [g.atom(rec, pool, 0.85)]))
        levels.append(names)
    if temporal:
        everything = list(g.sources) + list(g.derived)
        others = sorted(set(g.derived) - set(states))
        heads = states + rng.sample(others, rng.randint(0 if states else 1, min(2, len(others))))
        for name in heads:
            for j in range(rng.choice((1, 2, 2, 3))):
                carry = not transient or (j > 0 and rng.random() < 0.6)
                rules.append(g.inductive(name, everything, transient[0] if not carry else None))
    return Program(g.sources, g.derived, levels, rules, transient=frozenset(transient))


def _fact(g: _Gen, name: str) -> Rule:
    return Rule(name, tuple((a, g.constant(t)) for a, t in g.derived[name]))


def generate_negative_cycle(rng: random.Random) -> tuple[Program, Program, list[str]]:
    """(a valid program, the same plus rules closing a cycle through negation/aggregation, the cycle).

    The cycle is one of: p depends on itself negatively (negation or aggregate);
    a new q depends positively on p and p negatively on q; or, in a mutually
    recursive pair, a negative edge between the two.
    """
    for _ in range(1000):
        valid = generate(rng)
        g = _Gen(rng, dict(valid.sources), dict(valid.derived))
        lower_all = list(valid.sources)
        target_level = rng.choice(valid.levels)
        p = rng.choice(target_level)
        if not g.derived[p]:
            continue
        pos = list(valid.sources)
        kind = rng.choice(("self-neg", "self-agg", "via-q", "pair"))
        extra: list[Rule] = []
        cycle = [p]
        if kind == "self-neg":
            extra.append(g.rule(p, pos, lower_all, force_neg=p))
        elif kind == "self-agg":
            extra.append(g.rule(p, pos, lower_all, force_agg=p))
        elif kind == "via-q":
            q = f"d{len(valid.derived)}"
            g.declare_derived(q)
            if not g.derived[q]:
                continue
            extra.append(g.rule(q, pos, lower_all, required=[g.atom(p, list(INT_VARS) + list(STR_VARS))]))
            extra.append(g.rule(p, pos, lower_all, force_neg=q))
            cycle = [p, q]
        else:
            if len(target_level) != 2:
                continue
            q = next(d for d in target_level if d != p)
            if rng.random() < 0.5:
                extra.append(g.rule(p, pos, lower_all, force_neg=q))
            else:
                extra.append(g.rule(p, pos, lower_all, force_agg=q))
            cycle = [p, q]
        invalid = Program(g.sources, g.derived, [*valid.levels], valid.rules + extra)
        if len(g.derived) > len(valid.derived):
            invalid.levels.append([q])
        return valid, invalid, cycle
    raise AssertionError("no negative cycle generated")


# ---------------------------------------------------------------------------
# Writes

Store = dict[str, set[tuple]]
Batch = dict[str, dict[tuple, int]]  # source -> row -> +1 insert / -1 delete


def source_rows(program: Program, source: str) -> list[tuple]:
    domains = [STR_DOMAIN if t == "string" else INT_DOMAIN for _, t in program.sources[source]]
    return list(itertools.product(*domains))


def random_batch(rng: random.Random, program: Program, store: Store) -> Batch:
    """Inserts and deletes; present rows are re-inserted and absent ones deleted too (no-ops)."""
    batch: Batch = {}
    if rng.random() < 0.08:
        return batch  # an empty epoch
    for s in program.sources:
        if rng.random() < 0.3:
            continue
        rows = source_rows(program, s)
        if s in program.transient:  # events: this epoch's inserts are the relation
            events = {rng.choice(rows): 1 for _ in range(rng.randint(1, 3))}
            if store[s] and rng.random() < 0.3:  # deleting last epoch's event: a no-op
                events.setdefault(rng.choice(sorted(store[s])), -1)
            batch[s] = events
            continue
        ops: dict[tuple, int] = {}  # a dict: never insert and delete one row in a batch
        for _ in range(rng.randint(1, 7)):
            roll = rng.random()
            if roll < 0.15 and store[s]:
                ops[rng.choice(sorted(store[s]))] = 1  # re-insert a present row
            elif roll < 0.4 and store[s]:
                ops[rng.choice(sorted(store[s]))] = -1
            else:
                ops[rng.choice(rows)] = rng.choice((1, 1, 1, -1))
        batch[s] = ops
    return batch


def apply(store: Store, batch: Batch, transient: Collection[str] = ()) -> None:
    """The store after the batch; a transient source holds the batch's inserts only."""
    for s in transient:
        store[s] = {row for row, op in batch.get(s, {}).items() if op > 0}
    for s, ops in batch.items():
        if s not in transient:
            for row, op in ops.items():
                (store[s].add if op > 0 else store[s].discard)(row)


def batch_text(batch: Batch) -> str:
    parts = []
    for s, ops in sorted(batch.items()):
        ins = sorted(r for r, op in ops.items() if op > 0)
        dels = sorted(r for r, op in ops.items() if op < 0)
        parts.append(f"{s}: +{ins} -{dels}")
    return "; ".join(parts) or "(empty)"


# ---------------------------------------------------------------------------
# Oracles


def tuple_cid(program: Program, relation: str, row: tuple) -> str:
    """The tuple's CID: the planner's `cid` (whose encoding is BACK's to define) of its pairs."""
    from pomoview.planner.frontend.cid import cid

    return cid(relation, list(zip(program.attributes(relation), row, strict=True)))


def _symbol_value(program: Program, sym: clingo.Symbol) -> Value:
    if sym.type == clingo.SymbolType.Number:
        return int(sym.number)
    if sym.type == clingo.SymbolType.String:
        return str(sym.string)
    if sym.type == clingo.SymbolType.Function and sym.name.startswith("k_"):
        row = tuple(_symbol_value(program, a) for a in sym.arguments)
        return tuple_cid(program, sym.name[2:], row)
    raise AssertionError(f"unexpected clingo value {sym}")


def _fact_text(relation: str, row: tuple) -> str:
    args = ", ".join(term_text(v) for v in row)
    return f"{relation}({args}).\n" if row else f"{relation}.\n"


Nexts = dict[str, set[tuple]]  # p -> what p's inductive rules derived at the previous epoch


def solve(program: Program, store: Store) -> dict[str, set[tuple]]:
    """clingo's answer for every relation (sources too) over `store` (no time)."""
    return solve_epoch(program, store, {})[0]


def solve_epoch(program: Program, store: Store, nexts: Nexts) -> tuple[dict[str, set[tuple]], Nexts]:
    """clingo's answer for one epoch, and what its inductive rules derive for the next one."""
    facts = "".join(_fact_text(s, row) for s, rows in store.items() for row in sorted(rows))
    # nexts hold clingo's own terms (text), so that a CID stays the term k_rel(...)
    facts += "".join(
        f"{p}__next({', '.join(row)}).\n" if row else f"{p}__next.\n"
        for p, rows in nexts.items()
        for row in sorted(rows)
    )
    ctl = clingo.Control(["--warn=none"])
    ctl.add("base", [], facts + program.clingo())
    ctl.ground([("base", [])])
    models: list[list[clingo.Symbol]] = []
    ctl.solve(on_model=lambda m: models.append(list(m.symbols(shown=True))))
    assert len(models) == 1, "a stratified program has exactly one model"
    out: dict[str, set[tuple]] = {name: set() for name in program.relations()}
    arity = {name: len(program.schema(name)) for name in out}
    following: Nexts = {p: set() for p in program.inductive_heads()}
    for p in following:
        arity[f"{p}__ind"] = arity[p]
    for sym in models[0]:
        if arity.get(sym.name) == len(sym.arguments):
            if sym.name.endswith("__ind"):
                following[sym.name[: -len("__ind")]].add(tuple(str(a) for a in sym.arguments))
            else:
                out[sym.name].add(tuple(_symbol_value(program, a) for a in sym.arguments))
    return out, following


def solve_epochs(program: Program, batches: list[Batch]) -> list[dict[str, set[tuple]]]:
    """clingo's answer after install (epoch 0) and after each batch."""
    return _epochs(program, batches, solve_epoch)


def evaluate_epochs(program: Program, batches: list[Batch]) -> list[dict[str, set[tuple]]]:
    """The naive evaluator's answer after install (epoch 0) and after each batch."""
    return _epochs(program, batches, evaluate_epoch)


def _epochs(
    program: Program,
    batches: list[Batch],
    one: Callable[[Program, Store, Nexts], tuple[dict[str, set[tuple]], Nexts]],
) -> list[dict[str, set[tuple]]]:
    store: Store = {s: set() for s in program.sources}
    answer, nexts = one(program, store, {})
    out = [answer]
    for batch in batches:
        apply(store, batch, program.transient)
        answer, nexts = one(program, store, nexts)
        out.append(answer)
    return out


def _match(program: Program, atom: Atom, row: tuple, env: dict[str, Value]) -> dict[str, Value] | None:
    """`env` extended so that `atom` matches `row`, or None."""
    attrs = program.attributes(atom.relation)
    out = dict(env)
    for attr, term in atom.args:
        value = row[attrs.index(attr)]
        if isinstance(term, Var):
            if term.name in out:
                if out[term.name] != value:
                    return None
            else:
                out[term.name] = value
        elif term != value or type(term) is not type(value):
            return None
    return out


def _value(term: Term, env: dict[str, Value]) -> Value:
    return env[term.name] if isinstance(term, Var) else term


def _compare(a: Value, op: str, b: Value) -> bool:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    assert type(a) is type(b), (a, b)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]


def _aggregate(program: Program, agg: Agg, db: Store, env: dict[str, Value]) -> Value | None:
    rows = [row for row in db[agg.atom.relation] if _match(program, agg.atom, row, env) is not None]
    if agg.function == "count":
        return len(rows)
    assert agg.value is not None
    col = program.attributes(agg.atom.relation).index(
        next(a for a, t in agg.atom.args if t == Var(agg.value))
    )
    values = [row[col] for row in rows]  # rows are distinct tuples: a value may repeat
    if agg.function == "sum":
        return sum(values)  # type: ignore[arg-type]
    if not values:
        return None
    return min(values) if agg.function == "min" else max(values)  # type: ignore[type-var]


def _bindings(program: Program, rule: Rule, db: Store) -> Iterator[dict[str, Value]]:
    """Every binding of the rule's outer variables that satisfies its body."""
    positives = [lit for lit in rule.body if isinstance(lit, Pos)]
    rest: list[Literal] = [lit for lit in rule.body if not isinstance(lit, Pos)]

    def ready(lit: Literal, env: dict[str, Value]) -> bool:
        if isinstance(lit, Cmp):
            return all(not isinstance(t, Var) or t.name in env for t in (lit.lhs, lit.rhs))
        if isinstance(lit, Neg):
            return all(v in env for v in lit.atom.variables())
        assert isinstance(lit, Agg)
        outer = rule.outer_variables()
        return all(v in env for v in lit.atom.variables() if v in outer)

    def go(i: int, env: dict[str, Value], pending: list[Literal]) -> Iterator[dict[str, Value]]:
        if i < len(positives):
            atom, cid_var = positives[i].atom, positives[i].cid
            for row in db[atom.relation]:
                extended = _match(program, atom, row, env)
                if extended is not None and cid_var is not None:
                    value = tuple_cid(program, atom.relation, row)
                    if extended.setdefault(cid_var, value) != value:
                        continue
                if extended is not None:
                    yield from go(i + 1, extended, pending)
            return
        if not pending:
            yield env
            return
        lit = next(lit for lit in pending if ready(lit, env))
        others = [other for other in pending if other is not lit]
        if isinstance(lit, Cmp):
            if _compare(_value(lit.lhs, env), lit.op, _value(lit.rhs, env)):
                yield from go(i, env, others)
        elif isinstance(lit, Neg):
            if not any(_match(program, lit.atom, row, env) is not None for row in db[lit.atom.relation]):
                yield from go(i, env, others)
        else:
            assert isinstance(lit, Agg)
            result = _aggregate(program, lit, db, {k: v for k, v in env.items()})
            if result is not None:
                yield from go(i, {**env, lit.result: result}, others)

    yield from go(0, {}, rest)


def evaluate(program: Program, store: Store) -> dict[str, set[tuple]]:
    """Naive stratified bottom-up evaluation, level by level, to a fixed point (no time)."""
    return evaluate_epoch(program, store, {})[0]


def evaluate_epoch(program: Program, store: Store, nexts: Nexts) -> tuple[dict[str, set[tuple]], Nexts]:
    """One epoch: p starts from what its inductive rules derived at the previous epoch."""
    db: Store = {s: set(rows) for s, rows in store.items()}

    def derive(rules: list[Rule], into: Store) -> bool:
        changed = False
        for rule in rules:
            for env in list(_bindings(program, rule, db)):
                by_attr = dict(rule.head_args)
                row = tuple(_value(by_attr[a], env) for a in program.attributes(rule.head))
                if row not in into[rule.head]:
                    into[rule.head].add(row)
                    changed = True
        return changed

    for level in program.levels:
        for name in level:
            db[name] = set(nexts.get(name, set()))
        rules = [rule for rule in program.rules if rule.head in level and not rule.inductive]
        while derive(rules, db):
            pass
    following: Store = {p: set() for p in program.inductive_heads()}
    derive([rule for rule in program.rules if rule.inductive], following)
    return db, following


def well_formed(program: Program) -> bool:
    """The by-construction invariants (used when shrinking drops rules and literals)."""
    defined = set(program.sources) | {r.head for r in program.rules}
    for rule in program.rules:
        outer = rule.outer_variables()
        for lit in rule.body:
            atom = lit.atom if isinstance(lit, Pos | Neg | Agg) else None
            if atom is not None and atom.relation not in defined:
                return False
            if isinstance(lit, Neg) and not set(lit.atom.variables()) <= outer:
                return False
            if isinstance(lit, Cmp) and any(
                isinstance(t, Var) and t.name not in outer for t in (lit.lhs, lit.rhs)
            ):
                return False
            if isinstance(lit, Agg) and lit.value is not None and lit.value not in lit.atom.variables():
                return False
        if any(isinstance(t, Var) and t.name not in outer for _, t in rule.head_args):
            return False
    return all(name in defined for name in program.derived)
