"""Cyclic rule bodies through the Engine: the WcojJoin plan (partial readers over it, and
every state full) against the forced binary plan (`binary_joins=True`) and a Python
recomputation, after every write of random edge inserts and deletes; whole views and views
looked up by key (a partial reader over the full WcojJoin)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest

from pomoview.dataflow.operators.child import Child
from pomoview.dataflow.operators.nested_wcoj import NestedWcoj
from pomoview.dataflow.operators.wcoj import WcojJoin
from pomoview.dataflow.trace import Trace
from pomoview.engine.engine import Engine

Edges = set[tuple[int, int]]
Answer = Callable[[Edges, Edges], set[tuple[int, ...]]]
DOMAIN = 7

SOURCES = "source e(src: int, dst: int).\nsource f(src: int, dst: int).\nsource n(v: int).\n"


def _triangles(e: Edges, f: Edges) -> set[tuple[int, ...]]:
    # tri(A, B, C) :- e(A, B), f(B, C), e(A, C), A < B, C != 3, not n(A) [n is empty]
    return {(a, b, c) for a, b in e for b2, c in f if b2 == b and (a, c) in e and a < b and c != 3}


def _four_cycles(e: Edges, f: Edges) -> set[tuple[int, ...]]:
    # sq(A, C) :- e(A, B), e(B, C), e(C, D), e(D, A), B < D
    nxt: dict[int, set[int]] = {}
    for a, b in e:
        nxt.setdefault(a, set()).add(b)
    return {(a, c) for a, b in e for c in nxt.get(b, ()) for d in nxt.get(c, ()) if (d, a) in e and b < d}


def _cliques(e: Edges, f: Edges) -> set[tuple[int, ...]]:
    # k4(A, B, C, D) :- the six edges AB AC AD BC BD CD in e (a self-loop when two are
    # equal), D >= 2
    pairs = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
    return {
        q
        for q in itertools.product(range(DOMAIN), repeat=4)
        if q[3] >= 2 and all((q[x], q[y]) in e for x, y in pairs)
    }


def _open_triangles(e: Edges, f: Edges) -> set[tuple[int, ...]]:
    # open(A, B, C) :- e(A, B), e(B, C), e(A, C), not e(C, A), not f(B, 1)
    return {
        (a, b, c)
        for a, b in e
        for b2, c in e
        if b2 == b and (a, c) in e and (c, a) not in e and (b, 1) not in f
    }


PROGRAMS: dict[str, tuple[str, str, Answer, str]] = {
    # name: (rules, view, recomputation, the attribute a lookup is keyed by)
    "triangle": (
        "view tri(a).\n"
        "tri(a: A, b: B, c: C) :- e(src: A, dst: B), f(src: B, dst: C), e(src: A, dst: C), "
        "A < B, C != 3, !n(v: A).\n",
        "tri",
        _triangles,
        "a",
    ),
    # Negated atoms inside the WcojJoin: over its own relation e, and f with a constant.
    "triangle-not-back": (
        "view open(c).\n"
        "open(a: A, b: B, c: C) :- e(src: A, dst: B), e(src: B, dst: C), e(src: A, dst: C), "
        "!e(src: C, dst: A), !f(src: B, dst: 1).\n",
        "open",
        _open_triangles,
        "c",
    ),
    "4-cycle": (
        "view sq(b).\n"
        "sq(a: A, b: C) :- e(src: A, dst: B), e(src: B, dst: C), e(src: C, dst: D), e(src: D, dst: A), "
        "B < D.\n",
        "sq",
        _four_cycles,
        "b",
    ),
    "4-clique": (
        "view k4(c).\n"
        "k4(a: A, b: B, c: C, d: D) :- e(src: A, dst: B), e(src: A, dst: C), e(src: A, dst: D), "
        "e(src: B, dst: C), e(src: B, dst: D), e(src: C, dst: D), 2 <= D.\n",
        "k4",
        _cliques,
        "c",
    ),
}


def _operators(engine: Engine) -> set[str]:
    return {info.operator for info in engine.graph.graph.node_infos()}


def _batch(rng: random.Random, present: Edges) -> tuple[Edges, Edges]:
    """Some random edges to insert (dense enough for cycles) and some present ones to delete."""
    inserts = {(rng.randrange(DOMAIN), rng.randrange(DOMAIN)) for _ in range(rng.randrange(1, 9))}
    deletes = {edge for edge in present if rng.random() < 0.15} - inserts
    return inserts, deletes


def _rows(edges: Edges) -> list[dict[str, object]]:
    return [{"src": a, "dst": b} for a, b in edges]


def _three_engines(text: str) -> dict[str, Engine]:
    """The planner's plan with partial readers and all full, and binary joins forced."""
    return {
        "wcoj partial": Engine(text),
        "wcoj full": Engine(text, partial=False),
        "binary": Engine(text, binary_joins=True),
    }


def _write_all(engines: dict[str, Engine], rng: random.Random, present: dict[str, Edges]) -> None:
    """One random batch of each source in `present`, written to every engine and to `present`."""
    batch = {source: _batch(rng, present[source]) for source in present}
    for engine in engines.values():
        engine.write(
            insert={s: _rows(ins) for s, (ins, _) in batch.items()},
            delete={s: _rows(dels) for s, (_, dels) in batch.items()},
        )
    for source, (ins, dels) in batch.items():
        present[source] = (present[source] | ins) - dels


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_wcoj_plan_equals_binary_plan_and_recomputation(name: str, seed: int) -> None:
    rules, view, answer, key = PROGRAMS[name]
    engines = _three_engines(SOURCES + rules)
    rng = random.Random(seed)
    attributes = engines["binary"].attributes(view)
    position = attributes.index(key)
    present: dict[str, Edges] = {"e": set(), "f": set()}
    # Readers built at the first epoch and at a later one: hydration and steps both count.
    for epoch in range(12):
        _write_all(engines, rng, present)
        want = answer(present["e"], present["f"])
        if epoch in (0, 5) or epoch >= 8:
            for label, engine in engines.items():
                assert engine.read(view) == want, (label, epoch)
                for value in rng.sample(range(DOMAIN), 3):
                    got = engine.lookup(view, {key: value})
                    assert got == {row for row in want if row[position] == value}, (label, epoch, value)
    assert "WcojJoin" in _operators(engines["wcoj partial"])
    assert "WcojJoin" in _operators(engines["wcoj full"])
    assert "WcojJoin" not in _operators(engines["binary"])


def test_negated_relation_changes_above_the_wcoj_join() -> None:
    """A negated atom of the WcojJoin over a relation no positive atom reads: writes to it
    change the answer."""
    rules, view, _, _ = PROGRAMS["triangle"]
    engines = [Engine(SOURCES + rules), Engine(SOURCES + rules, binary_joins=True)]
    edges = {(0, 1), (1, 2), (0, 2), (1, 4), (4, 5), (1, 5)}
    for engine in engines:
        engine.write(insert={"e": _rows(edges), "f": _rows(edges)})
        assert engine.lookup(view, {"a": 0}) == {(0, 1, 2)}
        engine.write(insert={"n": [{"v": 0}]})
        assert engine.lookup(view, {"a": 0}) == set()
        assert engine.read(view) == {(1, 4, 5)}
        engine.write(delete={"n": [{"v": 0}]})
        assert engine.read(view) == {(0, 1, 2), (1, 4, 5)}


@pytest.mark.parametrize("seed", range(3))
def test_views_over_one_relation_share_its_indexes(seed: int) -> None:
    """Every program above in one: four cyclic views over e, readers built at different
    epochs (each later WcojJoin takes e's indexes as the earlier ones maintain them), whole
    and keyed, against the recomputation after every write; e's indexes are held once."""
    text = SOURCES + "".join(rules for rules, _, _, _ in PROGRAMS.values())
    engine = Engine(text)
    rng = random.Random(seed)
    present: dict[str, Edges] = {"e": set(), "f": set()}
    built: list[str] = []
    for epoch in range(10):
        batch = {source: _batch(rng, present[source]) for source in present}
        engine.write(
            insert={s: _rows(ins) for s, (ins, _) in batch.items()},
            delete={s: _rows(dels) for s, (_, dels) in batch.items()},
        )
        for source, (ins, dels) in batch.items():
            present[source] = (present[source] | ins) - dels
        if epoch % 2 == 0 and len(built) < len(PROGRAMS):
            built.append(list(PROGRAMS)[len(built)])  # a new view's readers, this epoch
        for name in built:
            _, view, answer, key = PROGRAMS[name]
            want = answer(present["e"], present["f"])
            assert engine.read(view) == want, (name, epoch)
            position = engine.attributes(view).index(key)
            for value in rng.sample(range(DOMAIN), 2):
                got = engine.lookup(view, {key: value})
                assert got == {row for row in want if row[position] == value}, (name, epoch, value)
    joins = [n for n in engine.graph.graph.nodes if isinstance(n, WcojJoin)]
    assert len(joins) == len(PROGRAMS)
    e_node = next(n for n in engine.graph.graph.nodes if getattr(n, "source", None) == "e")
    shared = {id(j.relations[j.relation_of[j.inputs.index(e_node)]]) for j in joins if e_node in j.inputs}
    assert len(shared) == 1, "e's indexes are held once"
    assert sum(not all(j.owned) for j in joins) == len(PROGRAMS) - 1


def _closure_runs(text: str, view: str, answer: Answer, seed: int) -> dict[str, Engine]:
    """The three engines over 10 epochs of random writes, each read whole and by x after
    each against `answer`'s recomputation; the engines, for their plans."""
    engines = _three_engines(text)
    rng = random.Random(seed)
    present: dict[str, Edges] = {"e": set(), "f": set()}
    for epoch in range(10):
        _write_all(engines, rng, present)
        want = answer(present["e"], present["f"])
        for label, engine in engines.items():
            assert engine.read(view) == want, (label, epoch)
            for value in rng.sample(range(DOMAIN), 3):
                got = engine.lookup(view, {"x": value})
                assert got == {row for row in want if row[0] == value}, (label, epoch, value)
    return engines


CLOSURE_OVER_TRIANGLES = SOURCES + (
    "view treach(x).\n"
    "treach(x: X, y: Y) :- f(src: X, dst: Y).\n"
    "treach(x: X, y: Z) :- treach(x: X, y: Y), e(src: Y, dst: Z), e(src: Z, dst: W), e(src: Y, dst: W), "
    "Z != W.\n"
)


def _closure_over_triangles(e: Edges, f: Edges) -> set[tuple[int, ...]]:
    """f's pairs extended along the e edges (Y, Z) that lie on a triangle Y Z W (Z != W)."""
    steps: dict[int, set[int]] = {}
    for y, z in e:
        if any(z2 == z and (y, w) in e and z != w for z2, w in e):
            steps.setdefault(y, set()).add(z)
    out = set(f)
    frontier = set(f)
    while frontier:
        frontier = {(x, z) for x, y in frontier for z in steps.get(y, ())} - out
        out |= frontier
    return out


@pytest.mark.parametrize("seed", range(4))
def test_a_recursive_body_over_triangles_equals_binary_plan_and_recomputation(seed: int) -> None:
    """The triangle of e in the recursive rule, joined by a WcojJoin outside the loop
    (planner/ir/cyclic.py), whole and keyed (a keyed reader through the demand rewrite, its
    triangle a WcojJoin over e too), after writes that make and break triangles and paths."""
    engines = _closure_runs(CLOSURE_OVER_TRIANGLES, "treach", _closure_over_triangles, seed)
    assert "WcojJoin" in _operators(engines["wcoj full"])
    assert "WcojJoin" in _operators(engines["wcoj partial"])
    assert "WcojJoin" not in _operators(engines["binary"])


@pytest.mark.parametrize("seed", range(2))
def test_two_views_with_one_body_share_one_wcoj_join(seed: int) -> None:
    """`ab` and `c` project the same triangle: one WcojJoin computes it for both (the
    planner's equal MultiJoins are one object), whole and keyed, after every write."""
    body = "e(src: A, dst: B), e(src: B, dst: C), e(src: A, dst: C)"
    text = SOURCES + f"view ab(a).\nview c(c).\nab(a: A, b: B) :- {body}.\nc(c: C) :- {body}.\n"
    engine = Engine(text)
    rng = random.Random(seed)
    present: Edges = set()
    for epoch in range(8):
        inserts, deletes = _batch(rng, present)
        engine.write(insert={"e": _rows(inserts)}, delete={"e": _rows(deletes)})
        present = (present | inserts) - deletes
        triangles = {(a, b, c) for a, b in present for b2, c in present if b2 == b and (a, c) in present}
        assert engine.read("ab") == {(a, b) for a, b, _ in triangles}, epoch
        assert engine.read("c") == {(c,) for _, _, c in triangles}, epoch
        value = rng.randrange(DOMAIN)
        assert engine.lookup("ab", {"a": value}) == {(a, b) for a, b, _ in triangles if a == value}
    assert sum(isinstance(n, WcojJoin) for n in engine.graph.graph.nodes) == 1


CLOSURE_THROUGH_TRIANGLES = SOURCES + (
    "view cr(x).\n"
    "cr(x: X, y: Y) :- f(src: X, dst: Y).\n"
    "cr(x: A, y: C) :- cr(x: A, y: B), e(src: B, dst: C), f(src: A, dst: C), A != B.\n"
)


def _closure_through_triangles(e: Edges, f: Edges) -> set[tuple[int, ...]]:
    """f's pairs, extended by e's edges (B, C) from a reached (A, B), A != B, where f(A, C)."""
    out = set(f)
    frontier = set(f)
    while frontier:
        frontier = {(a, c) for a, b in frontier if a != b for b2, c in e if b2 == b and (a, c) in f} - out
        out |= frontier
    return out


@pytest.mark.parametrize("seed", range(4))
def test_a_cycle_through_the_recursion_equals_binary_plan_and_recomputation(seed: int) -> None:
    """The triangle cr(A, B), e(B, C), f(A, C) closes through the recursive atom: one
    NestedWcoj in the loop (planner/ir/cyclic.py), whole and keyed (the keyed reader through
    the demand rewrite: the magic atom a fourth), over writes that make and break paths."""
    engines = _closure_runs(CLOSURE_THROUGH_TRIANGLES, "cr", _closure_through_triangles, seed)
    for label, engine in engines.items():
        children = [c for c in engine.graph.graph.nodes if isinstance(c, Child)]
        joins = [n for c in children for n in c.circuit.nodes if isinstance(n, NestedWcoj)]
        assert bool(joins) == (label != "binary"), label
        for join in joins:
            join.check()
        details = [info.detail for info in engine.graph.graph.node_infos() if info.operator == "Child"]
        named = any("NestedWcoj(cr(A, B), e(B, C), f(A, C), A != B" in d for d in details)
        assert named == bool(joins), details  # explain names it
        for child in children:
            # Stats counts the nested joins' indexes with the traces and the totals (and the
            # totals' indexes by the columns looked up).
            nodes = child.circuit.nodes
            traces = sum(len(n.trace) for n in nodes if isinstance(getattr(n, "trace", None), Trace))
            nested = sum(n.state_summary().rows for n in nodes if isinstance(n, NestedWcoj))
            assert child.state_summary().rows >= sum(map(len, child.totals)) + traces + nested, label


@pytest.mark.parametrize("seed", range(2))
def test_bodies_named_apart_share_one_wcoj_join(seed: int) -> None:
    """`ab` and `yz` read one triangle with its variables named apart, `s` and `u` one
    triangle without the tuples of n: two WcojJoins for the four views (the planner's
    forms up to variable names), each view right, whole and keyed, after every write."""
    tri = "e(src: {0}, dst: {1}), e(src: {1}, dst: {2}), e(src: {0}, dst: {2})"
    text = SOURCES + (
        "view ab(a).\nview yz(y).\nview s(x).\nview u(a).\n"
        f"ab(a: A, b: B) :- {tri.format('A', 'B', 'C')}.\n"
        f"yz(y: Y, z: Z) :- {tri.format('X', 'Y', 'Z')}.\n"
        f"s(x: X, y: Y) :- {tri.format('X', 'Y', 'Z')}, !n(v: Y).\n"
        f"u(a: A, b: B) :- {tri.format('A', 'B', 'C')}, !n(v: B).\n"
    )
    engine = Engine(text)
    rng = random.Random(seed)
    present: Edges = set()
    absent: set[int] = set()
    for epoch in range(8):
        inserts, deletes = _batch(rng, present)
        gone = {rng.randrange(DOMAIN)} - absent
        engine.write(
            insert={"e": _rows(inserts), "n": [{"v": v} for v in gone]}, delete={"e": _rows(deletes)}
        )
        present, absent = (present | inserts) - deletes, absent | gone
        triangles = {(a, b, c) for a, b in present for b2, c in present if b2 == b and (a, c) in present}
        kept = {(a, b) for a, b, _ in triangles if b not in absent}
        assert engine.read("ab") == {(a, b) for a, b, _ in triangles}, epoch
        assert engine.read("yz") == {(b, c) for _, b, c in triangles}, epoch
        assert engine.read("s") == kept == engine.read("u"), epoch
        value = rng.randrange(DOMAIN)
        assert engine.lookup("yz", {"y": value}) == {(b, c) for _, b, c in triangles if b == value}
        assert engine.lookup("u", {"a": value}) == {(a, b) for a, b in kept if a == value}
    assert sum(isinstance(n, WcojJoin) for n in engine.graph.graph.nodes) == 2
