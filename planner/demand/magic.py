"""The demand transformation (magic sets): a program rewritten so that a view looked up by
some of its attributes computes only what the looked-up keys reach.

For a view `v` read by key attributes K, the pass adds to the program (which it keeps
whole, so every other reader is as before):

- `source demand__v(K)`: the demanded keys, one row per key (the reader's present keys:
  an insertion per upquery, a deletion per eviction);
- for each derived relation `p` reached with bound attributes α (the adornment), a copy
  `p__α` (α spelled as one letter per attribute, `b` bound or `f` free, e.g. `reach__bf`)
  whose rules are `p`'s, each guarded by the magic relation `m__p__α` (the demanded values
  of α) as its first literal;
- magic rules that pass demand on, left to right (sideways information passing): for each
  positive atom of a derived relation `q` in a rule of `p__α`, the attributes it binds
  (constants, or variables bound by the guard and the literals before it) give `q` its
  adornment β, and `m__q__β(the bound attributes) :- m__p__α(...), the literals before it.`
  An atom that binds none of its attributes reads `q` whole.

Bancilhon and Ullman's generalized magic sets, as Soufflé's `MagicSet` transformer does it
(`src/ast/transform/MagicSet.cpp`), without its supplementary relations: a rule's prefix is
repeated in the magic rule instead. The answer for a demanded key is exactly the original
view's (tests/planner/test_magic_sets.py checks it against the program unchanged).

Slices (issue 25, part 3): a source named in `sliced` that a rule of an adorned copy reads
with some attributes bound (β, by constants or the literals before it) is read from a new
source `s__β` (e.g. `edge__bf`) instead: a slice of it, holding the rows of the keys in
`n__s__β` (the need relation, whose rules repeat the prefix as a magic rule does) that the
server has fetched (dataflow/operators/source_slice.py). Once every needed key is fetched,
every read of the slice is by a fetched key, so it answers as the whole source would. An
atom that binds no attribute, or in a rule guarded at its end, reads the source whole. An
atom whose bound attributes include those of an earlier atom's slice of the same source,
bound to the same terms, reads that slice (`_coarser`): its keys are needed already. Else an
atom bound partly by the demanded key's variables is read by those alone, its need rule the
guard: fetched in the lookup's first round rather than once the rest of it is bound.

Read whole, never adorned:
- an atom under negation or inside an aggregate, and a cid binding's atom. Demand on them
  would make their copy depend on the demand of the rules that negate or aggregate them,
  which in a recursive component depends on those rules' own results: a cycle through
  negation or aggregation, which stratification forbids. They keep their original, full
  definition, which depends on no demand.

The program is not rewritten (`Full`, with the reason) when:
- the view is read with no key attribute: nothing is bound, so everything is demanded;
- a key attribute's type is inferred as `any` (values of several types): the demand source
  is a source, and a source attribute needs a declared type;
- a rule the demand reaches is inductive (`@next`): its state carries from one epoch to
  the next and would need demand at every epoch, not only at lookups;
- a rule of a demanded relation does not give a bound attribute in its head.

A rule whose bound head attribute an aggregate or a cid binding computes is guarded at its
end instead: its body is computed as in the original (but for demand from constants), and
the guard keeps the rows of demanded keys.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass

from pomoview.planner.demand import text
from pomoview.planner.frontend import ast
from pomoview.planner.frontend.relations import CheckedProgram
from pomoview.planner.frontend.values import TYPES


@dataclass(frozen=True)
class Demanded:
    """The rewritten program's text; `relation` is the adorned copy the view's readers for
    the key read (rows of the demanded keys only), `demand` the source of demanded keys."""

    text: str
    relation: str
    demand: str
    key: tuple[str, ...]
    adorned: tuple[str, ...]  # every adorned copy, the view's first
    slices: tuple[Slice, ...] = ()


@dataclass(frozen=True)
class Slice:
    """A source read inside the demanded rules by bound attributes, held as a slice: the
    source `relation` (declared by the rewrite, filled by demand) holds `source`'s rows whose
    `key` attributes are among the rows of the derived relation `need`, whose rules are the
    prefixes of the body literals before each atom of the slice (what that atom is read by).
    """

    source: str
    relation: str
    need: str
    key: tuple[str, ...]  # in `source`'s attribute order


@dataclass(frozen=True)
class Full:
    """The view keeps its full definition for this key, and why."""

    reason: str


Adornment = tuple[str, frozenset[str]]  # (relation, its bound attributes)


def demand_program(
    checked: CheckedProgram, view: str, key: tuple[str, ...], sliced: Collection[str] = ()
) -> Demanded | Full:
    """`checked` rewritten for lookups of `view` by `key` (see the module docstring); the
    sources named in `sliced` are read through slices where an atom binds some of their
    attributes (see "Slices" there)."""
    if not key:
        return Full(f"{view!r} is read whole (no key attribute), so every row is demanded")
    untyped = [a for a in key if checked.relations[view].types.get(a) not in TYPES]
    if untyped:
        # The demand source is declared, and a source's attributes need a declared type.
        return Full(
            f"{view!r}'s key attribute {untyped[0]!r} has no single type, so no demand source can hold it"
        )
    names = _Names(set(checked.relations))
    relations = checked.relations
    start: Adornment = (view, frozenset(key))
    queue: deque[Adornment] = deque([start])
    seen = {start}
    rules: list[str] = []
    slices: dict[Adornment, None] = {}
    while queue:
        name, bound = queue.popleft()
        for rule in relations[name].rules:
            rewritten = _rewrite(rule, bound, checked, names, frozenset(sliced), slices)
            if isinstance(rewritten, Full):
                return rewritten
            rule_texts, wanted = rewritten
            rules += rule_texts
            for want in wanted:
                if want not in seen:
                    seen.add(want)
                    queue.append(want)
    demand = names.fresh(f"demand__{view}")
    attributes = relations[view].attributes
    typed = [(a, relations[view].types[a]) for a in attributes if a in key]
    seed_args = ", ".join(f"{a}: {_var(i)}" for i, (a, _) in enumerate(typed))
    out = [
        text.source(demand, typed),
        f"{names.magic(start, attributes)}({seed_args}) :- {demand}({seed_args}).",
        *rules,
    ]
    found: list[Slice] = []
    for source, bound in slices:
        declared = relations[source]
        name = names.adorned((source, bound), declared.attributes)
        out.append(text.source(name, [(a, declared.types[a]) for a in declared.attributes]))
        need = names.need((source, bound), declared.attributes)
        found.append(Slice(source, name, need, tuple(a for a in declared.attributes if a in bound)))
    adorned = tuple(names.adorned(a, relations[a[0]].attributes) for a in seen)
    return Demanded(
        checked.text.rstrip() + "\n\n% demand for " + f"{view}({', '.join(key)})\n" + "\n".join(out) + "\n",
        names.adorned(start, attributes),
        demand,
        tuple(a for a in attributes if a in key),
        tuple(sorted(adorned, key=lambda n: n != names.adorned(start, attributes))),
        tuple(found),
    )


def _rewrite(
    rule: ast.Rule,
    bound: frozenset[str],
    checked: CheckedProgram,
    names: _Names,
    sliced: frozenset[str],
    slices: dict[Adornment, None],
) -> tuple[list[str], list[Adornment]] | Full:
    """The rule's adorned copy and its magic and need rules, and the adornments its body
    asks for; the slices its body reads are added to `slices`."""
    head = rule.head
    relation = checked.relations[head.relation]
    if rule.inductive:
        return Full(f"the demand reaches {head.relation!r}, which has an inductive (@next) rule")
    terms = {arg.attribute: arg.term for arg in head.args}
    computed = _computed(rule)
    for attribute in bound:
        if attribute not in terms:
            return Full(f"a rule of {head.relation!r} does not give its bound attribute {attribute!r}")
    guard = ast.Atom(
        names.magic((head.relation, bound), relation.attributes),
        tuple(arg for arg in head.args if arg.attribute in bound),
        head.position,
    )
    guarded = frozenset({t.name for t in (terms[a] for a in bound) if isinstance(t, ast.Variable)})
    # A bound attribute an aggregate or a cid binding computes is known only after it: the
    # guard then filters the rule's rows at its end, and passes no demand into its body.
    late = bool(guarded & computed)
    known = set() if late else set(guarded)
    body: list[ast.BodyLiteral] = [] if late else [guard]
    # The literals a magic rule repeats: those before its atom that are safe on their own.
    prefix: list[ast.BodyLiteral] = [] if late else [guard]
    magic: list[str] = []
    wanted: list[Adornment] = []
    # Each slice this rule reads, by the terms its bound attributes take (`_coarser`).
    read: list[tuple[str, frozenset[str], dict[str, str]]] = []
    asked_already: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for lit in rule.body:
        atom = lit if isinstance(lit, ast.Atom) else None
        kind = None if atom is None else checked.relations[atom.relation].kind
        sliced_here = atom is not None and kind == "source" and not late and atom.relation in sliced
        binds = _bound(atom, known) if atom is not None and (kind == "derived" or sliced_here) else None
        if atom is not None and binds and sliced_here:
            binds = _coarser(atom, binds, read, guarded)
        if atom is not None and binds:
            # A derived atom is read from its adorned copy, whose demand a magic rule passes
            # on; a sliced source from its slice, whose keys a need rule asks for.
            want = (atom.relation, binds)
            attributes = checked.relations[atom.relation].attributes
            name = names.need(want, attributes) if sliced_here else names.magic(want, attributes)
            asked = ast.Atom(name, tuple(arg for arg in atom.args if arg.attribute in binds), atom.position)
            # `m(x: X) :- m(x: X), ...` adds nothing, nor a need asked already with a shorter
            # prefix (a longer one derives a subset of what it does).
            if _plain(asked) != _plain(guard) and _plain(asked) not in asked_already:
                # A slice read by the demanded key alone needs no more than the guard: its
                # keys are fetched in the lookup's first round (`_coarser`).
                before = (guard,) if sliced_here and _by_key(asked, guarded) else tuple(prefix)
                magic.append(text.rule(ast.Rule(asked, False, before, rule.position)))
                asked_already.add(_plain(asked))
            if sliced_here:
                slices[want] = None
            else:
                wanted.append(want)
            lit = ast.Atom(names.adorned(want, attributes), atom.args, atom.position)
        body.append(lit)
        if _repeatable(lit, known):
            prefix.append(lit)
            known |= _binds(lit)
    if late:
        body.append(guard)
    adorned_head = ast.Atom(
        names.adorned((head.relation, bound), relation.attributes), head.args, head.position
    )
    return [text.rule(ast.Rule(adorned_head, False, tuple(body), rule.position)), *magic], wanted


def _coarser(
    atom: ast.Atom,
    binds: frozenset[str],
    read: list[tuple[str, frozenset[str], dict[str, str]]],
    guarded: frozenset[str],
) -> frozenset[str]:
    """The attributes a sliced atom reads its slice by: `binds`, or fewer of them where an
    earlier atom of the rule reads the same source's slice by those, bound to the same terms
    (the shortcut `e(x: A, y: C)` of a triangle after `e(x: A, y: B)`): its keys are needed
    already, so the atom costs no fetch of its own, where by all of `binds` it would cost a
    round (bench/triangles.py: three rounds a cold vertex, two this way). Else, when some of
    `binds` take a variable of the demanded key (`guarded`) and others do not, by those only
    (a 4-cycle's closing atom `e(x: D, y: A)` keyed by A): their keys are known at the
    lookup, so the slice is fetched in its first round, where by the pair (D, A) it would
    wait for D, one round after the body's others. Not by a constant alone: a constant may
    select most of a source. Records the atom's choice in `read`."""
    terms = {arg.attribute: text.term(arg.term) for arg in atom.args}
    for source, earlier, at in read:
        if source == atom.relation and earlier < binds and all(terms[a] == at[a] for a in earlier):
            binds = earlier
            break
    else:
        early = frozenset(arg.attribute for arg in atom.args if _of_key(arg.term, guarded)) & binds
        if early and early < binds:
            binds = early
    read.append((atom.relation, binds, {a: terms[a] for a in binds}))
    return binds


def _of_key(term: ast.Term, guarded: frozenset[str]) -> bool:
    """Whether `term` is a variable of the demanded key."""
    return isinstance(term, ast.Variable) and term.name in guarded


def _by_key(atom: ast.Atom, guarded: frozenset[str]) -> bool:
    """Whether every term of `atom` is a variable of the demanded key."""
    return all(_of_key(arg.term, guarded) for arg in atom.args)


def _bound(atom: ast.Atom, known: set[str]) -> frozenset[str]:
    """The attributes of `atom` a constant or a variable of `known` binds."""
    return frozenset(
        arg.attribute for arg in atom.args if isinstance(arg.term, ast.Literal) or arg.term.name in known
    )


def _plain(atom: ast.Atom) -> tuple[str, tuple[tuple[str, str], ...]]:
    """An atom without its positions."""
    return atom.relation, tuple((arg.attribute, text.term(arg.term)) for arg in atom.args)


def _repeatable(lit: ast.BodyLiteral, known: set[str]) -> bool:
    """Whether a magic rule may repeat `lit` after the literals that bound `known`: a
    positive atom or a cid binding always; a comparison or a negation once its variables
    are bound. Never an aggregate: its groups are the variables it shares with the rest of
    the rule, which in a magic rule's shorter body are others, and so would be its values.
    Leaving a literal out only demands more, never less."""
    if isinstance(lit, ast.Atom | ast.CidBinding):
        return True
    if isinstance(lit, ast.Aggregate):
        return False
    return _variables(lit) <= known


def _variables(lit: ast.BodyLiteral) -> set[str]:
    if isinstance(lit, ast.Negation):
        return _binds(lit.atom)
    if isinstance(lit, ast.Constraint):
        return {t.name for t in (lit.left, lit.right) if isinstance(t, ast.Variable)}
    return _binds(lit)


def _binds(lit: ast.BodyLiteral) -> set[str]:
    """The variables a body literal binds (a comparison or a negation binds none)."""
    if isinstance(lit, ast.Atom):
        return {arg.term.name for arg in lit.args if isinstance(arg.term, ast.Variable)}
    if isinstance(lit, ast.CidBinding):
        return {lit.variable.name} | _binds(lit.atom)
    if isinstance(lit, ast.Aggregate):
        return {lit.result.name}
    return set()


def _computed(rule: ast.Rule) -> set[str]:
    """The variables of a rule that an aggregate or a cid binding computes."""
    out: set[str] = set()
    for lit in rule.body:
        if isinstance(lit, ast.Aggregate):
            out.add(lit.result.name)
        elif isinstance(lit, ast.CidBinding):
            out.add(lit.variable.name)
    return out


def _var(i: int) -> str:
    return f"K{i}"


class _Names:
    """Names for the new relations that no relation of the program has."""

    def __init__(self, taken: set[str]) -> None:
        self._taken = taken
        self._given: dict[str, str] = {}

    def fresh(self, wanted: str) -> str:
        if wanted in self._given:
            return self._given[wanted]
        name = wanted
        while name in self._taken:
            name += "_"
        self._taken.add(name)
        self._given[wanted] = name
        return name

    def adorned(self, adornment: Adornment, attributes: list[str]) -> str:
        name, bound = adornment
        return self.fresh(f"{name}__{''.join('b' if a in bound else 'f' for a in attributes)}")

    def need(self, adornment: Adornment, attributes: list[str]) -> str:
        name, bound = adornment
        return self.fresh(f"n__{name}__{''.join('b' if a in bound else 'f' for a in attributes)}")

    def magic(self, adornment: Adornment, attributes: list[str]) -> str:
        name, bound = adornment
        return self.fresh(f"m__{name}__{''.join('b' if a in bound else 'f' for a in attributes)}")
