"""WcojJoin: the delta-query n-way join against the full join recomputed from scratch by
nested loops, after every step of random Z-set batches (inserts, deletes, weights other
than 1, several inputs changing in one step)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pytest
from dataflow_harness import Driver, Store
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Node, Value, select_keys
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.wcoj import Compare, Const, Term, WcojJoin
from pomoview.dataflow.state.collection_index import IndexRegistry, RelationIndexes
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


class ZInput(Input):
    """A source that passes its deltas on as they are (any weights) and keeps their sum,
    so that the join can hydrate from it."""

    def __init__(self, source: str, arity: int) -> None:
        super().__init__(source, tuple(f"c{i}" for i in range(arity)))
        self.total: ZSet[Row] = ZSet()

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        delta = inputs[0]
        if isinstance(delta, ZSet):
            self.total.extend(delta)
        return delta

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        return select_keys(ZSet(dict(self.total.items())), cols, keys)


class Sink(Node):
    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))
        self.total: ZSet[Row] = ZSet()

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        self.total.extend(delta)
        return ZSet()


@dataclass(frozen=True)
class Body:
    """A rule body: (relation, terms) per atom, the output variables, the constraints."""

    atoms: tuple[tuple[str, tuple[Term, ...]], ...]
    variables: tuple[str, ...]
    constraints: tuple[Compare, ...] = ()
    negated: tuple[tuple[str, tuple[Term, ...]], ...] = ()  # `not r(...)` atoms

    def arities(self) -> dict[str, int]:
        return {name: len(terms) for name, terms in self.atoms + self.negated}


def holds(c: Compare, env: dict[str, int]) -> bool:
    right = c.right.value if isinstance(c.right, Const) else env[c.right]
    left = env[c.left]
    return {"<": left < right, "<=": left <= right, "!=": left != right, "==": left == right}[c.op]


def reference(body: Body, data: dict[str, ZSet[Row]]) -> ZSet[Row]:
    """The join by nested loops over the atoms' rows, weights multiplied."""
    out: ZSet[Row] = ZSet()

    def present(name: str, terms: tuple[Term, ...], env: dict[str, int]) -> bool:
        row = tuple(t.value if isinstance(t, Const) else env[t] for t in terms)
        return data[name].weight(row) > 0  # as ra.AntiJoin reads its right side

    def go(k: int, env: dict[str, int], weight: int) -> None:
        if k == len(body.atoms):
            if all(holds(c, env) for c in body.constraints) and not any(
                present(name, terms, env) for name, terms in body.negated
            ):
                out.add(tuple(env[v] for v in body.variables), weight)
            return
        name, terms = body.atoms[k]
        for row, w in data[name].items():
            bound = dict(env)
            for term, value in zip(terms, row, strict=True):
                if isinstance(term, Const):
                    if term.value != value:
                        break
                elif bound.setdefault(term, value) != value:
                    break
            else:
                go(k + 1, bound, weight * w)

    go(0, {}, 1)
    return out


def E(*terms: Term) -> tuple[Term, ...]:
    return terms


BODIES = {
    "triangle-one-relation": Body(
        (("e", E("a", "b")), ("e", E("b", "c")), ("e", E("a", "c"))), ("a", "b", "c")
    ),
    "triangle-three-relations": Body(
        (("r", E("a", "b")), ("s", E("b", "c")), ("t", E("a", "c"))), ("c", "a", "b")
    ),
    "four-cycle": Body(
        (("e", E("a", "b")), ("f", E("b", "c")), ("e", E("c", "d")), ("f", E("d", "a"))), ("a", "b", "c", "d")
    ),
    "four-clique": Body(
        tuple(("e", E(x, y)) for x, y in ("ab", "ac", "ad", "bc", "bd", "cd")),
        ("a", "b", "c", "d"),
    ),
    "triangle-a<b": Body(
        (("e", E("a", "b")), ("e", E("b", "c")), ("e", E("a", "c"))),
        ("a", "b", "c"),
        (Compare("a", "<", "b"), Compare("c", "!=", Const(2))),
    ),
    # Negation: of the positive atoms' own relation (reversed edges), of another relation
    # with a constant, and two negated atoms over one relation.
    "triangle-not-reversed": Body(
        (("e", E("a", "b")), ("e", E("b", "c")), ("e", E("a", "c"))),
        ("a", "b", "c"),
        negated=(("e", E("b", "a")),),
    ),
    "triangle-not-g": Body(
        (("e", E("a", "b")), ("f", E("b", "c")), ("e", E("a", "c"))),
        ("a", "b", "c"),
        (Compare("a", "!=", "c"),),
        negated=(("g", E("c", Const(1))), ("g", E("a", "b"))),
    ),
    # A ternary relation, read by one bound column on some paths (non-covering indexes).
    "wide-with-constant": Body(
        (("w", E("a", "b", "c")), ("e", E("a", "d")), ("e", E("d", "b")), ("f", E("c", Const(1)))),
        ("a", "b", "c", "d"),
    ),
}

DOMAIN = 4
WEIGHTS = st.sampled_from((1, 1, -1, 2, -2, 3))


def rows(arity: int) -> st.SearchStrategy[Row]:
    return st.tuples(*[st.integers(0, DOMAIN - 1)] * arity)


def batches(arities: dict[str, int]) -> st.SearchStrategy[list[dict[str, dict[Row, int]]]]:
    batch = st.fixed_dictionaries(
        {name: st.dictionaries(rows(arity), WEIGHTS, max_size=6) for name, arity in arities.items()}
    )
    return st.lists(batch, min_size=1, max_size=8)


class Harness:
    """The join over ZInputs, stepped through a circuit, checked against `reference`."""

    def __init__(self, body: Body, initial: dict[str, dict[Row, int]]) -> None:
        self.body = body
        self.inputs = {name: ZInput(name, arity) for name, arity in body.arities().items()}
        for name, ops in initial.items():
            self.inputs[name].total.extend(ZSet(ops))
        atoms = body.atoms + body.negated
        self.join = WcojJoin(
            tuple(self.inputs[name] for name, _ in atoms),
            tuple(terms for _, terms in atoms),
            body.variables,
            body.constraints,
            negated=len(body.negated),
        )
        self.sink = Sink(self.join)
        self.circuit = Circuit(self.sink)
        self.circuit.hydrate()
        self.sink.total = self.join.query((), [()])

    def data(self) -> dict[str, ZSet[Row]]:
        return {name: node.total for name, node in self.inputs.items()}

    def step(self, batch: dict[str, dict[Row, int]]) -> None:
        self.circuit.step({name: ZSet(ops) for name, ops in batch.items()})

    def check(self) -> None:
        expected = reference(self.body, self.data())
        assert self.sink.total == expected, (self.sink.total, expected)


@pytest.mark.parametrize("name", sorted(BODIES))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_integral_equals_the_join(name: str, data: st.DataObject) -> None:
    body = BODIES[name]
    history = data.draw(batches(body.arities()))
    harness = Harness(body, history[0])
    harness.check()
    for batch in history[1:]:
        harness.step(batch)
        harness.check()
    # An upquery recomputes the join from the indexes alone: the whole of it, or from keys.
    total = harness.sink.total
    assert harness.join.query((), [()]) == total
    width = len(body.variables)
    for cols in ((0,), (width - 1,), (2, 0), tuple(range(width))):
        keys = {tuple(row[c] for c in cols) for row, _ in total.items()}
        keys |= {(v,) * len(cols) for v in range(DOMAIN)}
        assert harness.join.query(cols, keys) == select_keys(total, cols, keys), cols


def test_simultaneous_changes_on_every_port_count_once() -> None:
    """One relation read by three atoms, every edge of a triangle inserted in one step:
    the triangle appears once with the weights' product, and goes in one step too."""
    harness = Harness(BODIES["triangle-one-relation"], {})
    harness.step({"e": {(1, 2): 2, (2, 3): 3, (1, 3): 5}})
    assert harness.sink.total == ZSet({(1, 2, 3): 30})
    harness.step({"e": {(1, 2): -2, (2, 3): -3, (1, 3): -5}})
    assert harness.sink.total == ZSet()
    harness.step({"e": {(1, 2): 1, (2, 3): 1, (1, 3): 1, (3, 1): 1, (2, 1): 1}})
    harness.check()


def test_state_is_the_forward_and_reverse_index() -> None:
    """A triangle over e holds two entries per edge (e by its first column and by its
    second), shared by the three atoms, and no two-path."""
    edges = {(0, v): 1 for v in range(1, 40)} | {(v, v + 1): 1 for v in range(1, 39)}
    harness = Harness(BODIES["triangle-one-relation"], {"e": edges})
    harness.check()
    summary = harness.join.state_summary()
    assert summary.rows == 2 * len(edges) and not summary.partial
    assert len(harness.join.relations) == 1 and len(harness.join.relations[0].indexes) == 2
    assert "e(a, b): a b -> c; e(b, c): b c -> a; e(a, c): a c -> b" in harness.join.describe()


def test_over_source_indexes_in_a_circuit() -> None:
    """Over the real source nodes (set semantics), hydrated from existing data."""
    store = Store({"e": ("x", "y")})
    store.data["e"] |= {(0, 1), (1, 2), (0, 2), (2, 0)}
    edges = store.index("e", (), False)
    body = BODIES["triangle-one-relation"]
    join = WcojJoin((edges, edges, edges), tuple(t for _, t in body.atoms), body.variables)

    def expected(s: Store) -> ZSet[Row]:
        return reference(body, {"e": ZSet({row: 1 for row in s.data["e"]})})

    driver = Driver(store, join, expected)
    driver.check()
    for batch in ({"e": {(1, 0): 1, (2, 1): 1}}, {"e": {(0, 1): -1, (1, 0): -1, (3, 3): 1}}):
        driver.step(batch)
        driver.check()


def test_on_delta_is_one_input_emitting() -> None:
    """`on_delta(port, delta)`: the node at `port` emitted `delta`, on every port it feeds."""
    body = BODIES["triangle-one-relation"]
    harness = Harness(body, {})
    out = harness.join.on_delta(1, ZSet({(1, 2): 1, (2, 3): 1, (1, 3): 1}))
    assert out == ZSet({(1, 2, 3): 1})


@pytest.mark.parametrize("name", sorted(BODIES))
def test_no_index_proposes_a_whole_column(name: str) -> None:
    """On these connected bodies every extender is keyed by a bound column: an atom none of
    whose columns is bound yet waits for its next variable (a four-cycle's opposite edge)."""
    join = Harness(BODIES[name], {}).join
    keys = [index.key_cols for relation in join.relations for index in relation.indexes.values()]
    assert all(keys), keys


# Bodies over the relations e and f that read e positively, negated, and by a wider key.
SHARING = ("triangle-one-relation", "triangle-not-reversed", "four-cycle", "triangle-a<b")


class SharedHarness:
    """Joins of several bodies over the same input nodes, their indexes shared through one
    IndexRegistry, in one circuit; a join made after some steps joins in (hydrated from the
    relations the others keep, not from the inputs)."""

    def __init__(self, names: Sequence[str], initial: dict[str, dict[Row, int]]) -> None:
        self.registry = IndexRegistry()
        self.inputs = {name: ZInput(name, 2) for name in ("e", "f")}
        for name, ops in initial.items():
            self.inputs[name].total.extend(ZSet(ops))
        self.joins: dict[str, tuple[WcojJoin, Sink]] = {}
        for name in names:
            self.add(name)

    def add(self, name: str) -> None:
        body = BODIES[name]
        atoms = body.atoms + body.negated
        join = WcojJoin(
            tuple(self.inputs[n] for n, _ in atoms),
            tuple(terms for _, terms in atoms),
            body.variables,
            body.constraints,
            negated=len(body.negated),
            indexes=self.registry,
        )
        sink = Sink(join)
        self.joins[name] = (join, sink)
        self.circuit = Circuit([s for _, s in self.joins.values()])
        join.hydrate()  # a no-op for the relations another join loaded
        sink.total = join.query((), [()])

    def step(self, batch: dict[str, dict[Row, int]]) -> None:
        self.circuit.step({name: ZSet(ops) for name, ops in batch.items()})

    def check(self) -> None:
        data = {name: node.total for name, node in self.inputs.items()}
        for name, (join, sink) in self.joins.items():
            assert sink.total == reference(BODIES[name], data), name
            assert join.query((), [()]) == sink.total, name


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_joins_sharing_indexes_each_equal_their_join(data: st.DataObject) -> None:
    """Every join over shared indexes equals its join recomputed from scratch after every
    step, in whichever order the circuit runs them (the first to run applies the step's
    changes; the others read the relation before it as the indexes minus the changes),
    and a join added later shares the maintained indexes instead of loading its own."""
    order = data.draw(st.permutations(SHARING))
    history = data.draw(batches({"e": 2, "f": 2}))
    late_at = data.draw(st.integers(0, len(history) - 1))
    harness = SharedHarness(order[:-1], history[0])
    harness.check()
    for n, batch in enumerate(history[1:]):
        if n == late_at:
            harness.add(order[-1])
            harness.check()
        harness.step(batch)
        harness.check()
    joins = [join for join, _ in harness.joins.values()]
    e = harness.inputs["e"]
    relations = {id(j.relations[j.relation_of[j.inputs.index(e)]]) for j in joins}
    assert len(relations) == 1, "every join reads e's indexes through one RelationIndexes"
    # The relation is counted once, by the join that made it.
    assert sum(j.state_summary().rows for j in joins) == sum(r.summary()[1] for r in _distinct(joins))


def _distinct(joins: Sequence[WcojJoin]) -> list[RelationIndexes]:
    out: dict[int, RelationIndexes] = {}
    for join in joins:
        for relation in join.relations:
            out[id(relation)] = relation
    return list(out.values())
