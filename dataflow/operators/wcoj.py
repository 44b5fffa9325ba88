"""WcojJoin: the worst-case-optimal n-way join of a rule body, as delta queries (3DF's
Hector, Ammar et al.'s delta-BiGJoin, differential dataflow's dogsdogsdogs).

The body is k atoms over variables: atom i reads input i, each column a variable or a
constant (`Const`); `constraints` compare a variable with a variable or a constant. The
output row holds the values of `variables` (every variable of the body, in the declared
order), with weight the product of the atoms' rows' weights: for Z-sets R_1..R_k, exactly
the natural join's Z-set.

Contract:
- Multilinear (one factor per atom). For the step's deltas dR_1..dR_k the output is
  d(R_1 ⋈ ... ⋈ R_k) = Σ_i R'_1 ⋈ .. ⋈ R'_{i-1} ⋈ dR_i ⋈ R_{i+1} ⋈ .. ⋈ R_k, where R' is
  R with the step's delta applied (the telescoping sum that counts each combination of
  simultaneous changes once: the "older/newer" views of 3DF's AltNeu timestamps). One
  update path per atom computes its term.
- Update path i: the rows of dR_i bind atom i's variables; then the other variables one
  at a time, in a fixed order per path (`orders`: atom i's variables, then the unbound
  variable touched by the most atoms already constrained, ties in the order of
  `variables`). For each prefix, every atom holding the next variable says how many
  values extend the prefix (`count`), the one with the fewest proposes them, and the
  others validate each proposal; an atom's row weight is multiplied at the index where
  the atom becomes fully bound. A constraint is tested as soon as its variables are
  bound (a proposal is tested before it is validated). An atom whose variables the
  start binds entirely is a membership test of its row.
- State: per distinct input (an input read by several atoms, the same node on several
  ports, is indexed once), the `CollectionIndex`es the paths use (state/collection_index.py),
  made when the node is built and hydrated from the inputs; nothing else. Joins of one
  graph reading the same node share its indexes (the builder's `IndexRegistry`: two rules
  over `edge` hold edge's indexes once); the first join made them and counts them in its
  state. A step computes the indexes' changes first (once for every join reading them),
  runs every path against views of the indexes before (atoms after i) or after (atoms
  before i) the changes, then applies them (the step's first join to finish does).
- Deltas: `eval` takes every port's delta of a step at once; `on_delta(port, delta)` is a
  step in which the node read at `port` emitted `delta` (on every port it feeds).
- Full mode only: no partial state, no missing keys, no eviction (a keyed view's body is
  guarded by its demanded keys instead, planner/demand/readers.py: `demand_driven` then,
  its indexes holding only what the demanded keys reach). An upquery by some
  output columns starts from the keys as bindings of their variables and extends them the
  same way over every atom (a lookup path per set of columns, whose indexes are made, from
  the rows held, at its first use); one by no column, the whole join, is path 0 over every
  row of atom 0.
- Negation: the last `negated` atoms are negated (`not r(...)`), each over variables the
  positive atoms bind. A negated atom is a factor too, [its tuple is absent] (absent: a
  total weight that is not positive, as ra.AntiJoin reads its right side), placed after
  every positive atom in the sum above. It constrains a binding once the binding is
  whole (a membership test that drops it when the tuple is present); its own update path
  starts from the tuples whose presence the step flipped (+1 gone, -1 come) and extends
  them over the positive atoms.
- Not yet: a variable repeated within one atom, an atom with no variable (the planner,
  planner/ir/cyclic.py, keeps the first whole, filtered below the join, and joins the second
  above it).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pomoview.dataflow.node import EvictCols, FetchRequest, Node, StateSummary, Value, active
from pomoview.dataflow.operators.filter import COMPARE
from pomoview.dataflow.state.collection_index import (
    CollectionIndex,
    Extensions,
    IndexRegistry,
    RelationIndexes,
    StepChanges,
)
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


@dataclass(frozen=True)
class Const:
    """A constant in an atom's column or on a constraint's right."""

    value: Any


Term = str | Const  # a variable's name, or a constant


@dataclass(frozen=True)
class Compare:
    """`left op right`, `op` one of == != < <= > >=."""

    left: str
    op: str
    right: str | Const


Binding = tuple[Any, ...]  # the values of a path's variables bound so far, in its order
# Where a value comes from: (its position in the binding, None), or (-1, a constant).
Part = tuple[int, Any]
Getter = Callable[[Binding], Key]


def _getter(parts: Sequence[Part]) -> Getter:
    if all(p >= 0 for p, _ in parts):
        positions = tuple(p for p, _ in parts)
        if len(positions) == 1:
            only = positions[0]
            return lambda b: (b[only],)
        if not positions:
            return lambda b: ()
        return operator.itemgetter(*positions)
    frozen = tuple(parts)
    return lambda b: tuple(b[p] if p >= 0 else c for p, c in frozen)


@dataclass
class _Access:
    """Atom `atom` asked through `index` for the prefix `prefix(binding)`."""

    atom: int
    index: CollectionIndex
    prefix: Getter
    value: Callable[[Binding], Any] | None = None  # a membership test's value


@dataclass
class _Test:
    """A constraint over the binding's values."""

    compare: Callable[[Any, Any], Any]
    left: Part
    right: Part

    def holds(self, b: Binding) -> bool:
        left = b[self.left[0]] if self.left[0] >= 0 else self.left[1]
        right = b[self.right[0]] if self.right[0] >= 0 else self.right[1]
        try:
            return bool(self.compare(left, right))
        except TypeError:  # values of different types: an ordering between them never holds
            return False


@dataclass
class _Step:
    """Binds `var`: `extenders` count, propose and validate; then `tests` hold."""

    var: str
    extenders: list[_Access]
    tests: list[_Test]


@dataclass
class _Path:
    """The update path of atom `atom`'s delta."""

    atom: int
    order: tuple[str, ...]
    start_cols: tuple[int, ...]  # the atom's variables' columns, in `order`
    start_consts: tuple[tuple[int, Any], ...]  # the atom's constant columns
    checks: list[_Access]  # memberships of atoms the start binds entirely
    tests: list[_Test]  # constraints the start binds
    steps: list[_Step]
    absent: list[_Access]  # the negated atoms other than `atom`, tested once bound whole
    output: Getter


def _passes(tests: list[_Test], b: Binding) -> bool:
    return all(t.holds(b) for t in tests)


class WcojJoin(Node):
    stateful = True

    def __init__(
        self,
        inputs: tuple[Node, ...],
        atoms: tuple[tuple[Term, ...], ...],
        variables: tuple[str, ...],
        constraints: tuple[Compare, ...] = (),
        labels: tuple[str, ...] | None = None,
        negated: int = 0,
        indexes: IndexRegistry | None = None,
    ) -> None:
        """`labels` name the atoms' relations in `describe` (default: an input's source, else
        its port); the last `negated` atoms are negated. `indexes`: the graph's registry,
        through which joins reading the same node share its indexes (default: its own)."""
        assert len(inputs) == len(atoms) >= 2 + negated, "one atom per input, two positive at least"
        assert labels is None or len(labels) == len(atoms)
        super().__init__(variables, inputs)
        self.atoms = atoms
        self.constraints = constraints
        self.labels = labels
        self.demand_driven = False  # reads a demand source: holds the demanded part only
        self.positive = len(atoms) - negated  # atoms [0, positive) are positive
        registry = indexes if indexes is not None else IndexRegistry()
        self.atom_vars: list[tuple[str, ...]] = []
        for node, terms in zip(inputs, atoms, strict=True):
            assert len(terms) == len(node.schema), f"atom {terms} over {node.schema}"
            names = tuple(t for t in terms if isinstance(t, str))
            assert len(set(names)) == len(names), f"a variable repeated in {terms}"
            self.atom_vars.append(names)
        body = {v for names in self.atom_vars[: self.positive] for v in names}
        assert set(variables) == body and len(variables) == len(body), "variables: each of the body's once"
        for names in self.atom_vars[self.positive :]:
            assert names and set(names) <= body, f"a negated atom over {names}: unsafe, or no variable"
        for c in constraints:
            assert c.op in COMPARE and c.left in body and (isinstance(c.right, Const) or c.right in body), c
        # One index set per distinct input node: a relation read by several atoms is shared,
        # and so is one another join of the graph reads (the first join made it: `owned`).
        self.relation_of: list[int] = []
        self.relations: list[RelationIndexes] = []
        self.owned: list[bool] = []  # counted in this node's state_summary
        seen: dict[int, int] = {}
        for node in inputs:
            if id(node) not in seen:
                seen[id(node)] = len(self.relations)
                relation = registry.relation(node, len(node.schema))
                self.relations.append(relation)
                self.owned.append(relation.readers == 1)
            self.relation_of.append(seen[id(node)])
        self.paths = [self._plan(self.atom_vars[i], i) for i in range(len(atoms))]
        self.lookups: dict[tuple[str, ...], _Path] = {}  # by the variables a lookup binds

    # -- planning ------------------------------------------------------------------------

    def _constrained(self, j: int, bound: Collection[str]) -> bool:
        """Whether atom j has a column bound: a constant, or a variable in `bound`."""
        return any(isinstance(t, Const) or t in bound for t in self.atoms[j])

    def _unbound(self, j: int, bound: Collection[str]) -> list[str]:
        return [v for v in self.atom_vars[j] if v not in bound]

    def _order(self, start: tuple[str, ...], i: int) -> tuple[str, ...]:
        order = list(start)
        bound = set(order)
        while len(order) < len(self.schema):
            # The variable the most atoms already constrain (by a bound variable or a
            # constant) prunes most; an unconnected one would propose a whole column.
            def score(v: str) -> int:
                return sum(
                    1
                    for j in range(self.positive)
                    if j != i and v in self.atom_vars[j] and self._constrained(j, bound)
                )

            unbound = [v for v in self.schema if v not in bound]
            best = max(unbound, key=lambda v: (score(v), -self.schema.index(v)))
            order.append(best)
            bound.add(best)
        return tuple(order)

    def _access(self, j: int, bound: Mapping[str, int], value: str | None) -> _Access:
        """Atom j's access path with the variables `bound` (name -> binding position): keyed
        by its bound columns, extending the column of `value` (or, for a membership test,
        keyed by all but its last column)."""
        terms = self.atoms[j]
        fixed = [c for c, t in enumerate(terms) if isinstance(t, Const) or t in bound]
        value_col = terms.index(value) if value is not None else fixed.pop()

        def part(c: int) -> Part:
            t = terms[c]
            return (-1, t.value) if isinstance(t, Const) else (bound[t], None)

        key_cols = tuple(fixed)
        index = self.relations[self.relation_of[j]].index(key_cols, value_col)
        access = _Access(j, index, _getter([part(c) for c in key_cols]))
        if value is None:
            pos, const = part(value_col)
            access.value = (lambda b: b[pos]) if pos >= 0 else (lambda b: const)
        return access

    def _tests(self, bound: Mapping[str, int], new: Collection[str]) -> list[_Test]:
        """The constraints bound by `bound` that involve one of `new`."""

        def part(t: str | Const) -> Part:
            return (-1, t.value) if isinstance(t, Const) else (bound[t], None)

        out = []
        for c in self.constraints:
            names = {c.left} | ({c.right} if isinstance(c.right, str) else set())
            if names <= bound.keys() and names & set(new):
                out.append(_Test(COMPARE[c.op], part(c.left), part(c.right)))
        return out

    def _plan(self, start: tuple[str, ...], i: int) -> _Path:
        """The path that starts from bindings of `start` and extends them over every atom
        but `i` (the delta's atom; -1 for a lookup, which starts from the keys)."""
        order = self._order(start, i)
        bound = {v: k for k, v in enumerate(start)}
        terms = self.atoms[i] if i >= 0 else ()
        checks = [
            self._access(j, bound, None)
            for j in range(self.positive)
            if j != i and set(self.atom_vars[j]) <= bound.keys()
        ]
        tests = self._tests(bound, start)
        steps = []
        for v in order[len(start) :]:
            holding = [j for j in range(self.positive) if j != i and v in self.atom_vars[j]]
            # An atom with none of its columns bound yet would propose or validate against a
            # whole column (an index keyed by nothing): it waits for a later variable, which
            # binds it with this one. Unless the variable is its last, or no atom is bound.
            ready = [j for j in holding if self._constrained(j, bound) or len(self._unbound(j, bound)) == 1]
            extenders = [self._access(j, bound, v) for j in (ready or holding[:1])]
            bound[v] = len(bound)
            steps.append(_Step(v, extenders, self._tests(bound, (v,))))
        return _Path(
            atom=i,
            order=order,
            start_cols=tuple(terms.index(v) for v in start) if i >= 0 else (),
            start_consts=tuple((c, t.value) for c, t in enumerate(terms) if isinstance(t, Const)),
            checks=checks,
            tests=tests,
            steps=steps,
            absent=[self._access(j, bound, None) for j in range(self.positive, len(self.atoms)) if j != i],
            output=_getter([(bound[v], None) for v in self.schema]),
        )

    # -- forward -------------------------------------------------------------------------

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        return self.step(inputs, time)

    def step(self, inputs: Sequence[Value | None], stamp: Hashable) -> ZSet[Row]:
        """The output for the deltas at each port (None: no change), `stamp` naming the
        step for the relations other joins share (the same stamp, the same step)."""
        deltas: dict[int, ZSet[Row]] = {}
        for port, value in enumerate(inputs):
            if active(value):
                assert isinstance(value, ZSet), f"{self.describe()} takes ZSets, got {type(value).__name__}"
                deltas[self.relation_of[port]] = value
        return self._step(deltas, stamp)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        return self._step({self.relation_of[port]: delta}, object())

    def _step(self, deltas: Mapping[int, ZSet[Row]], stamp: Hashable) -> ZSet[Row]:
        """The step's output. A relation another join of the graph reads may have had the
        step's changes applied by that join already (`StepChanges.applied`): its view
        before the step is then the index minus them."""
        steps: dict[int, StepChanges] = {
            r: self.relations[r].step_changes(stamp, d) for r, d in deltas.items() if d
        }
        out: ZSet[Row] = ZSet()
        for path in self.paths:
            delta = deltas.get(self.relation_of[path.atom])
            if not delta:
                continue

            # Atoms before this one see their relation with the step's delta, atoms after
            # without: each combination of simultaneous changes is counted by one path.
            def seen(access: _Access, i: int = path.atom) -> Extensions:
                step = steps.get(self.relation_of[access.atom])
                if step is None:
                    return access.index
                return step.after(access.index) if access.atom < i else step.before(access.index)

            rows: Iterable[tuple[Row, int]]
            if path.atom < self.positive:
                rows = delta.items()
            else:
                rows = self._flips(path.atom, delta, steps[self.relation_of[path.atom]])
            self._run(path, self._start(path, rows), seen, out)
        for r, step in steps.items():
            self.relations[r].finish(step)
        return out

    def _flips(self, atom: int, delta: ZSet[Row], step: StepChanges) -> Iterable[tuple[Row, int]]:
        """The change of a negated atom's factor [absent] per tuple of its relation's `delta`:
        +1 for a tuple the step made absent, -1 for one it made present (against the weights
        before the step: the covering index, minus the step's changes when another join
        applied them)."""
        covering = self.relations[self.relation_of[atom]].covering()
        where, at = covering.key_cols, covering.value_col
        held = step.before(covering)
        for row, weight in delta.items():
            old = held.validate(tuple(row[c] for c in where), row[at])
            flip = (old > 0) - (old + weight > 0)
            if flip:
                yield row, flip

    @staticmethod
    def _start(path: _Path, rows: Iterable[tuple[Row, int]]) -> Iterable[tuple[Binding, int]]:
        """The bindings of atom `path.atom`'s rows."""
        for row, weight in rows:
            if not any(row[c] != value for c, value in path.start_consts):
                yield tuple(row[c] for c in path.start_cols), weight

    def _run(
        self,
        path: _Path,
        start: Iterable[tuple[Binding, int]],
        seen: Callable[[_Access], Extensions],
        out: ZSet[Row],
    ) -> None:
        """Adds to `out` the join of the `start` bindings with the other atoms' views."""
        checks = [(a, seen(a)) for a in path.checks]
        bindings: list[tuple[Binding, int]] = []
        for b, weight in start:
            if path.tests and not _passes(path.tests, b):
                continue
            for access, checked in checks:
                assert access.value is not None
                weight *= checked.validate(access.prefix(b), access.value(b))
                if not weight:
                    break
            else:
                bindings.append((b, weight))
        for step in path.steps:
            if not bindings:
                return
            bindings = _extend([(a, seen(a)) for a in step.extenders], step.tests, bindings)
        absent = [(a, seen(a)) for a in path.absent]
        for b, weight in bindings:
            if all(_absent(a, held, b) for a, held in absent):
                out.add(path.output(b), weight)

    # -- state ---------------------------------------------------------------------------

    def hydrate(self) -> list[FetchRequest]:
        for node, r in zip(self.inputs, self.relation_of, strict=True):
            relation = self.relations[r]
            if not relation.loaded:  # loaded already when another join of the graph reads it
                relation.add(node.query((), [()]))
                relation.loaded = True
        return []

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        """The join for the keys, extended from the keys themselves (a lookup path per set of
        columns, its indexes made at its first use); without columns, the whole join, from
        every row of atom 0."""
        out: ZSet[Row] = ZSet()
        if not cols:
            rows = self.relations[self.relation_of[0]].covering().rows()
            self._run(self.paths[0], self._start(self.paths[0], rows), _as_they_are, out)
            return out
        names = tuple(dict.fromkeys(self.schema[c] for c in cols))
        path = self.lookups.get(names)
        if path is None:
            path = self.lookups[names] = self._plan(names, -1)
        first = {name: cols.index(self.schema.index(name)) for name in names}
        # A key repeating a column with two values selects nothing.
        start = (
            (tuple(key[first[n]] for n in names), 1)
            for key in dict.fromkeys(keys)
            if all(key[k] == key[first[self.schema[c]]] for k, c in enumerate(cols))
        )
        self._run(path, start, _as_they_are, out)
        return out

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        raise AssertionError(f"eviction reached the full state {self.describe()}")

    def state_summary(self) -> StateSummary:
        prefixes = entries = size = 0
        for relation, owned in zip(self.relations, self.owned, strict=True):
            if not owned:
                continue  # the join that made it counts it
            p, e, b = relation.summary()
            prefixes, entries, size = prefixes + p, entries + e, size + b
        return StateSummary((), self.demand_driven, prefixes, entries, size)

    def describe(self) -> str:
        def atom(i: int) -> str:
            name = self.labels[i] if self.labels else getattr(self.inputs[i], "source", None) or f"#{i}"
            terms = ", ".join(repr(t.value) if isinstance(t, Const) else t for t in self.atoms[i])
            return f"{'not ' if i >= self.positive else ''}{name}({terms})"

        body = ", ".join(atom(i) for i in range(len(self.atoms)))
        where = "".join(
            f", {c.left} {c.op} {repr(c.right.value) if isinstance(c.right, Const) else c.right}"
            for c in self.constraints
        )
        orders = "; ".join(
            f"{atom(p.atom)}: {' '.join(p.order[: len(self.atom_vars[p.atom])])} -> "
            f"{' '.join(p.order[len(self.atom_vars[p.atom]) :])}"
            for p in self.paths
        )
        mode = "demand-driven" if self.demand_driven else "full"
        if not all(self.owned):
            mode += ", indexes shared"
        return f"WcojJoin({body}{where}; orders {orders}; {mode})"


def _absent(access: _Access, held: Extensions, b: Binding) -> bool:
    """Whether a negated atom's tuple under `b` is absent (no positive weight)."""
    assert access.value is not None, "a negated atom is a membership test"
    return held.validate(access.prefix(b), access.value(b)) <= 0


def _as_they_are(access: _Access) -> Extensions:
    return access.index


def _extend(
    extenders: list[tuple[_Access, Extensions]], tests: list[_Test], bindings: list[tuple[Binding, int]]
) -> list[tuple[Binding, int]]:
    """Each binding extended by one variable: proposed by the extender with the fewest
    extensions for it, validated by the others, then tested by `tests`."""
    out: list[tuple[Binding, int]] = []
    for b, weight in bindings:
        prefixes = [access.prefix(b) for access, _ in extenders]
        best, fewest = 0, -1
        for k, (_, seen) in enumerate(extenders):
            n = seen.count(prefixes[k])
            if fewest < 0 or n < fewest:
                best, fewest = k, n
                if not n:
                    break
        if not fewest:
            continue
        proposer = extenders[best][1]
        for value, proposed in proposer.propose(prefixes[best]).items():
            extended = b + (value,)
            if tests and not _passes(tests, extended):
                continue
            # A covering index's weight is its row's; a non-covering one only says it exists.
            w = weight * proposed if proposer.covering else weight
            for k, (_, seen) in enumerate(extenders):
                if k == best:
                    continue
                found = seen.validate(prefixes[k], value)
                if not found:
                    break
                if seen.covering:
                    w *= found
            else:
                out.append((extended, w))
    return out
