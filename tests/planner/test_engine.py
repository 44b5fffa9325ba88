"""The in-process Engine: write validation, time (@next, transient sources), recursion
with deletions, negation across strata and user-defined aggregates.

Expected answers come from plain-Python recomputation from scratch over the
current base relations (`closure`, `model_*` below), never from the engine.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from pomoview.engine.engine import Engine
from pomoview.planner.frontend.errors import ProgramError

Edge = tuple[int, int]


def closure(edges: set[Edge]) -> set[Edge]:
    reach = set(edges)
    while True:
        more = {(x, z) for (x, y) in reach for (y2, z) in edges if y == y2} - reach
        if not more:
            return reach
        reach |= more


def edge_rows(edges: set[Edge] | list[Edge]) -> list[dict[str, object]]:
    return [{"x": x, "y": y} for x, y in sorted(edges)]


def random_edge_history(seed: int, nodes: int = 5, epochs: int = 12) -> list[set[Edge]]:
    """The edge set after each epoch: random inserts and deletes, cycles included."""
    rng = random.Random(seed)
    edges: set[Edge] = set()
    history = []
    for _ in range(epochs):
        for _ in range(rng.randint(0, 4)):
            e = (rng.randrange(nodes), rng.randrange(nodes))
            if e in edges and rng.random() < 0.6:
                edges.discard(e)
            else:
                edges.add(e)
        history.append(set(edges))
    return history


def step_edges(engine: Engine, old: set[Edge], new: set[Edge], relation: str = "edge") -> None:
    engine.write({relation: edge_rows(new - old)}, {relation: edge_rows(old - new)})


# -- writes --------------------------------------------------------------------

TYPED = """
source t(i: int, f: float, s: string, b: bool, y: bytes).
source u(x: int).
d(x: X) :- u(x: X).
"""
GOOD = {"i": 1, "f": 2.5, "s": "a", "b": True, "y": b"\x00"}


@pytest.mark.parametrize(
    ("insert", "delete", "reason"),
    [
        ({"nope": [{"x": 1}]}, {}, "no source named 'nope'"),
        ({"d": [{"x": 1}]}, {}, "'d' is derived"),
        ({"u": [{"x": 1, "z": 2}]}, {}, "no attribute 'z'"),
        ({"u": [{}]}, {}, "missing attribute 'x'"),
        ({"u": [{"x": "1"}]}, {}, "expected int"),
        ({"u": [{"x": True}]}, {}, "expected int"),  # a bool is not an int
        ({"u": [{"x": 1.0}]}, {}, "expected int"),
        ({"t": [{**GOOD, "b": 1}]}, {}, "expected bool"),
        ({"t": [{**GOOD, "s": b"a"}]}, {}, "expected string"),
        ({"t": [{**GOOD, "y": "a"}]}, {}, "expected bytes"),
        ({"t": [{**GOOD, "f": "2.5"}]}, {}, "expected float"),
        ({"t": [{**GOOD, "f": float("nan")}]}, {}, "NaN"),
        ({"u": [{"x": 1}]}, {"u": [{"x": 1}]}, "both inserted and deleted"),
        ({"u": [{"x": 2}]}, {"nope": [{"x": 1}]}, "no source named 'nope'"),
    ],
)
def test_bad_writes_are_refused_whole(insert: dict, delete: dict, reason: str) -> None:
    engine = Engine(TYPED)
    engine.write({"u": [{"x": 7}], "t": [GOOD]})
    before = (engine.read("u"), engine.read("d"), engine.read("t"), engine.epoch)
    with pytest.raises(ValueError, match=reason):
        engine.write(insert, delete)
    assert (engine.read("u"), engine.read("d"), engine.read("t"), engine.epoch) == before


def test_writes_are_set_operations() -> None:
    engine = Engine(TYPED)
    assert engine.epoch == 0
    assert engine.write({"u": [{"x": 1}, {"x": 1}, {"x": 2}]}) == 1
    assert engine.write({"u": [{"x": 1}]}, {"u": [{"x": 5}]}) == 2  # no-ops both
    assert engine.read("d") == {(1,), (2,)}
    assert engine.write() == 3  # an empty batch is an epoch too
    engine.write(delete={"u": [{"x": 1}]})
    assert engine.read("d") == engine.read("u") == {(2,)}
    assert engine.lookup("u", {"x": 2}) == {(2,)}  # a source can be looked up too
    # an int is accepted for a float attribute, and stored as a float
    engine.write({"t": [{**GOOD, "f": 3}]})
    assert (1, 3.0, "a", True, b"\x00") in engine.read("t")
    assert engine.attributes("t") == ("i", "f", "s", "b", "y")


def test_reads_of_unknown_names_are_refused() -> None:
    engine = Engine(TYPED)
    with pytest.raises(ValueError, match="no relation named"):
        engine.read("nope")
    with pytest.raises(ValueError, match="no attribute 'z'"):
        engine.lookup("d", {"z": 1})


def test_a_bad_program_raises_program_error() -> None:
    with pytest.raises(ProgramError):
        Engine("source a(x: int).\nb(x: X) :- a(x: X), !b(x: X).\n")


# -- recursion -------------------------------------------------------------------

TC = """
source edge(x: int, y: int).
tc(x: X, y: Y) :- edge(x: X, y: Y).
tc(x: X, y: Z) :- tc(x: X, y: Y), edge(x: Y, y: Z).
"""

EVEN_ODD = """
source edge(x: int, y: int).
odd(x: X, y: Y) :- edge(x: X, y: Y).
odd(x: X, y: Z) :- edge(x: X, y: Y), even(x: Y, y: Z).
even(x: X, y: Z) :- edge(x: X, y: Y), odd(x: Y, y: Z).
"""


def paths_by_parity(edges: set[Edge], nodes: int) -> tuple[set[Edge], set[Edge]]:
    """(odd, even): pairs joined by a walk of odd / even positive length."""
    odd, even = set(edges), set()
    while True:
        new_even = {(x, z) for (x, y) in edges for (y2, z) in odd if y == y2}
        new_odd = set(edges) | {(x, z) for (x, y) in edges for (y2, z) in even if y == y2}
        if new_even == even and new_odd == odd:
            return odd, even
        odd, even = new_odd, new_even


@pytest.mark.parametrize("seed", range(8))
def test_transitive_closure_with_deletions(seed: int) -> None:
    engine = Engine(TC)
    old: set[Edge] = set()
    lookups_from = 3  # a partial reader first asked mid-way
    for epoch, edges in enumerate(random_edge_history(seed), start=1):
        step_edges(engine, old, edges)
        old = edges
        want = closure(edges)
        assert engine.read("tc") == want, f"seed {seed} epoch {epoch}"
        if epoch >= lookups_from:
            for x in range(5):
                assert engine.lookup("tc", {"x": x}) == {e for e in want if e[0] == x}


@pytest.mark.parametrize("seed", range(6))
def test_mutual_recursion_with_deletions(seed: int) -> None:
    engine = Engine(EVEN_ODD)
    old: set[Edge] = set()
    for epoch, edges in enumerate(random_edge_history(seed, nodes=4), start=1):
        step_edges(engine, old, edges)
        old = edges
        odd, even = paths_by_parity(edges, 4)
        assert engine.read("odd") == odd, f"seed {seed} epoch {epoch}"
        assert engine.read("even") == even, f"seed {seed} epoch {epoch}"
        assert engine.lookup("even", {"y": 0}) == {e for e in even if e[1] == 0}


# -- negation and aggregation across strata -------------------------------------

STRATA = """
source node(n: int).
source edge(x: int, y: int).
source blocked(n: int).
open(x: X, y: Y) :- edge(x: X, y: Y), !blocked(n: Y).
reach(x: X, y: Y) :- open(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), open(x: Y, y: Z), !blocked(n: X).
unreachable(x: X, y: Y) :- node(n: X), node(n: Y), X != Y, !reach(x: X, y: Y).
fanout(x: X, n: N) :- node(n: X), N := count : reach(x: X).
lonely(x: X) :- node(n: X), N := count : reach(x: X), N == 0, !blocked(n: X).
"""


def model_strata(nodes: set[int], edges: set[Edge], blocked: set[int]) -> dict[str, set[tuple]]:
    open_ = {(x, y) for (x, y) in edges if y not in blocked}
    reach = set(open_)
    while True:
        more = {(x, z) for (x, y) in reach for (y2, z) in open_ if y == y2 and x not in blocked} - reach
        if not more:
            break
        reach |= more
    return {
        "open": open_,
        "reach": reach,
        "unreachable": {(x, y) for x in nodes for y in nodes if x != y and (x, y) not in reach},
        "fanout": {(x, sum(1 for r in reach if r[0] == x)) for x in nodes},
        "lonely": {(x,) for x in nodes if x not in blocked and not any(r[0] == x for r in reach)},
    }


@pytest.mark.parametrize("seed", range(8))
def test_negation_and_aggregation_across_strata(seed: int) -> None:
    """A negation inside a recursive stratum (of a source), negation and count of a
    recursive relation by later strata, with random writes to every source."""
    rng = random.Random(seed)
    engine = Engine(STRATA)
    nodes: set[int] = set()
    edges: set[Edge] = set()
    blocked: set[int] = set()
    for epoch in range(1, 11):
        batch_in: dict[str, list[dict[str, object]]] = {"node": [], "edge": [], "blocked": []}
        batch_out: dict[str, list[dict[str, object]]] = {"node": [], "edge": [], "blocked": []}
        for _ in range(rng.randint(1, 5)):
            kind = rng.choice(("node", "edge", "edge", "blocked"))
            if kind == "edge":
                e = (rng.randrange(5), rng.randrange(5))
                target, row = edges, e
                item: dict[str, object] = {"x": e[0], "y": e[1]}
            else:
                n = rng.randrange(5)
                target, row, item = (nodes if kind == "node" else blocked), n, {"n": n}
            if item in batch_in[kind] or item in batch_out[kind]:
                continue
            if row in target:
                target.discard(row)  # type: ignore[arg-type]
                batch_out[kind].append(item)
            else:
                target.add(row)  # type: ignore[arg-type]
                batch_in[kind].append(item)
        engine.write(batch_in, batch_out)
        want = model_strata(nodes, edges, blocked)
        for relation, expected in want.items():
            assert engine.read(relation) == expected, f"seed {seed} epoch {epoch} {relation}"
        for x in range(5):
            assert engine.lookup("fanout", {"x": x}) == {r for r in want["fanout"] if r[0] == x}
            assert engine.lookup("unreachable", {"x": x}) == {r for r in want["unreachable"] if r[0] == x}


# -- time: @next and transient sources ----------------------------------------------

SEEN = """
source edge(x: int, y: int).
transient source ping(n: int).
seen(n: N) :- ping(n: N).
seen(n: Y) :- seen(n: X), edge(x: X, y: Y).
seen(n: N)@next :- seen(n: N).
quiet(n: N) :- seen(n: N), !ping(n: N).
size(c: C) :- C := count : seen(n: N).
"""


def test_next_carries_a_recursive_relation_forward() -> None:
    """seen(t) = closure under edge(t) of ping(t) ∪ seen(t-1); it never shrinks. Later
    strata negate and count it."""
    rng = random.Random(7)
    engine = Engine(SEEN)
    edges: set[Edge] = set()
    seen: set[int] = set()
    for epoch in range(1, 16):
        old_edges = set(edges)
        for _ in range(rng.randint(0, 2)):
            e = (rng.randrange(6), rng.randrange(6))
            edges.symmetric_difference_update({e})
        pings = {rng.randrange(6) for _ in range(rng.randint(0, 2))}
        engine.write(
            {"edge": edge_rows(edges - old_edges), "ping": [{"n": p} for p in pings]},
            {"edge": edge_rows(old_edges - edges)},
        )
        now = pings | seen
        while True:
            more = {y for (x, y) in edges if x in now} - now
            if not more:
                break
            now |= more
        seen = now
        assert engine.read("ping") == {(p,) for p in pings}, f"epoch {epoch}"
        assert engine.read("seen") == {(n,) for n in seen}, f"epoch {epoch}"
        assert engine.read("quiet") == {(n,) for n in seen - pings}, f"epoch {epoch}"
        assert engine.read("size") == {(len(seen),)}, f"epoch {epoch}"
        assert engine.lookup("seen", {"n": 0}) == ({(0,)} if 0 in seen else set())


COUNTER = """
transient source tick(n: int).
source limit(n: int).
step(n: 0) :- limit(n: L).
step(n: M)@next :- step(n: N), tick(n: M), M > N, limit(n: L), M <= L.
step(n: N)@next :- step(n: N), !tick(n: N), !moved(from: N).
moved(from: N) :- step(n: N), tick(n: M), M > N, limit(n: L), M <= L.
"""


def model_counter_step(
    step: set[int], ticks: set[int], limits: set[int]
) -> set[int]:
    """COUNTER's inductive bodies at one epoch: what `step` holds at the next."""
    moves = {(n, m) for n in step for m in ticks for lim in limits if m > n and m <= lim}
    moved = {n for n, _ in moves}
    return {m for _, m in moves} | {n for n in step if n not in ticks and n not in moved}


@pytest.mark.parametrize("seed", range(4))
def test_next_with_deductive_start_and_events(seed: int) -> None:
    """A relation with deductive and inductive rules: step(t) = the deductive start at t
    (while a limit exists) ∪ the inductive bodies at t-1 (moves on ticks, else carry)."""
    rng = random.Random(seed)
    engine = Engine(COUNTER)
    limits: set[int] = set()
    carried: set[int] = set()  # the inductive bodies' result at the previous epoch
    for epoch in range(1, 20):
        ticks = {rng.randrange(6) for _ in range(rng.choice((0, 0, 1, 2)))}
        change = rng.randrange(6) if rng.random() < 0.3 else None
        ins = [{"n": change}] if change is not None and change not in limits else []
        out = [{"n": change}] if change is not None and change in limits else []
        if change is not None:
            limits.symmetric_difference_update({change})
        engine.write({"tick": [{"n": t} for t in ticks], "limit": ins}, {"limit": out})
        step = ({0} if limits else set()) | carried
        assert engine.read("step") == {(n,) for n in step}, f"seed {seed} epoch {epoch}"
        assert engine.lookup("step", {"n": 0}) == ({(0,)} if 0 in step else set())
        carried = model_counter_step(step, ticks, limits)


def test_transient_tuples_last_one_epoch() -> None:
    engine = Engine("transient source ev(n: int).\nlast(n: N) :- ev(n: N).\n")
    engine.write({"ev": [{"n": 1}, {"n": 2}]})
    assert engine.read("last") == {(1,), (2,)}
    assert engine.lookup("last", {"n": 1}) == {(1,)}
    engine.write({"ev": [{"n": 2}, {"n": 3}]})
    assert engine.read("last") == {(2,), (3,)}
    assert engine.lookup("last", {"n": 1}) == set()
    engine.write(delete={"ev": [{"n": 3}]})  # deleting an event that is already gone: a no-op
    assert engine.read("last") == set() == engine.read("ev")


# -- user-defined aggregates -----------------------------------------------------

def _median(values: list[tuple]) -> object:
    if not values:
        return None  # no result: the rule does not fire
    xs = [v for (v,) in values]
    return xs[len(xs) // 2]


AGGS: dict[str, Callable[[list[tuple]], object]] = {
    "median": _median,
    "names": lambda values: ",".join(v for (v,) in values),  # "" for an empty group
    "pairs": lambda values: len(values),
}

USER = """
source score(who: string, points: int, game: int).
source player(who: string).
mid(who: W, m: M) :- player(who: W), M := median P : score(who: W, points: P).
roster(list: L) :- L := names W : player(who: W).
games(who: W, n: N) :- player(who: W), N := pairs P G : score(who: W, points: P, game: G).
"""


def model_user(players: set[str], scores: set[tuple[str, int, int]]) -> dict[str, set[tuple]]:
    mid = set()
    games = set()
    for w in players:
        points = sorted({(p,) for (x, p, _) in scores if x == w})
        value = _median(points)
        if value is not None:
            mid.add((w, value))
        games.add((w, len({(p, g) for (x, p, g) in scores if x == w})))
    return {"mid": mid, "roster": {(",".join(sorted(players)),)}, "games": games}


def test_user_defined_aggregates() -> None:
    """Functions of the group's distinct value tuples, sorted; None is no result."""
    rng = random.Random(3)
    engine = Engine(USER, aggregates=AGGS)
    players: set[str] = set()
    scores: set[tuple[str, int, int]] = set()
    for epoch in range(1, 12):
        ins: dict[str, list[dict[str, object]]] = {"player": [], "score": []}
        out: dict[str, list[dict[str, object]]] = {"player": [], "score": []}
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:
                w = rng.choice("abc")
                (out if w in players else ins)["player"].append({"who": w})
                players.symmetric_difference_update({w})
            else:
                s = (rng.choice("abc"), rng.randrange(4), rng.randrange(2))
                item = {"who": s[0], "points": s[1], "game": s[2]}
                if item in ins["score"] or item in out["score"]:
                    continue
                (out if s in scores else ins)["score"].append(item)
                scores.symmetric_difference_update({s})
        # a player toggled twice in one batch would be both inserted and deleted
        if any(p in out["player"] for p in ins["player"]):
            continue
        engine.write(ins, out)
        for relation, expected in model_user(players, scores).items():
            assert engine.read(relation) == expected, f"epoch {epoch} {relation}"
        mids = model_user(players, scores)["mid"]
        assert engine.lookup("mid", {"who": "a"}) == {r for r in mids if r[0] == "a"}


def test_unknown_user_aggregate_is_refused() -> None:
    with pytest.raises(ProgramError, match="unknown aggregate 'median'"):
        Engine(USER)


# -- content ids -----------------------------------------------------------------

CIDS = """
source category(name: string).
source product(name: string, category: cid).
named(name: N, id: C) :- C := category(name: N).
inCategory(product: P, category: N) :- product(name: P, category: C), C := category(name: N).
orphan(product: P) :- product(name: P, category: C), !named(id: C).
"""


def test_content_ids_join_and_negate() -> None:
    """A cid column joined with `C := atom`, looked up by the cid itself (the key cannot
    pass through the hash: full below) and by another column (partial through it)."""
    from pomoview.planner.frontend.cid import cid

    def c(name: str) -> str:
        return cid("category", [("name", name)])

    engine = Engine(CIDS)
    engine.write(
        {
            "category": [{"name": "fruit"}, {"name": "veg"}],
            "product": [{"name": "apple", "category": c("fruit")}, {"name": "rock", "category": c("stone")}],
        }
    )
    assert engine.read("named") == {("fruit", c("fruit")), ("veg", c("veg"))}
    assert engine.lookup("named", {"name": "veg"}) == {("veg", c("veg"))}
    assert engine.lookup("named", {"id": c("fruit")}) == {("fruit", c("fruit"))}
    assert engine.read("inCategory") == {("apple", "fruit")}
    assert engine.lookup("inCategory", {"category": "fruit"}) == {("apple", "fruit")}
    assert engine.read("orphan") == {("rock",)}
    engine.write({"category": [{"name": "stone"}]}, {"category": [{"name": "fruit"}]})
    assert engine.read("inCategory") == {("rock", "stone")}
    assert engine.read("orphan") == {("apple",)}
    assert engine.lookup("named", {"id": c("fruit")}) == set()
    assert engine.lookup("named", {"name": "stone"}) == {("stone", c("stone"))}
    assert engine.lookup("inCategory", {"category": "fruit"}) == set()


# -- partial state through negation ------------------------------------------------

def test_a_key_through_an_antijoin_keeps_partial_state() -> None:
    """Looked up by the negation's join column, the antijoin and both sources are partial:
    writes at keys nobody asked for are dropped, asked keys stay exact."""
    from pomoview.dataflow.operators.antijoin import AntiJoin
    from pomoview.dataflow.operators.source_index import SourceIndex

    engine = Engine(
        "source a(x: int, y: int).\nsource b(x: int).\nr(x: X, y: Y) :- a(x: X, y: Y), !b(x: X).\n"
    )
    a = {(x, y) for x in range(4) for y in range(2)}
    engine.write({"a": [{"x": x, "y": y} for x, y in a], "b": [{"x": 3}]})
    assert engine.lookup("r", {"x": 1}) == {(1, 0), (1, 1)}
    circuit = engine.readers[("r", ("x",))]
    nodes = [n for n in circuit.nodes if isinstance(n, (AntiJoin, SourceIndex))]
    assert nodes and all(n.partial for n in nodes), circuit.explain()
    dropped = circuit.metrics.dropped
    engine.write({"b": [{"x": 2}], "a": [{"x": 2, "y": 5}]})  # keys never asked for
    assert circuit.metrics.dropped > dropped
    engine.write({"b": [{"x": 1}]})
    assert engine.lookup("r", {"x": 1}) == set()
    engine.write(delete={"b": [{"x": 1}, {"x": 3}]})
    assert engine.lookup("r", {"x": 1}) == {(1, 0), (1, 1)}
    assert engine.lookup("r", {"x": 3}) == {(3, 0), (3, 1)}
    assert engine.lookup("r", {"x": 2}) == set()
    assert engine.read("r") == {(x, y) for x, y in a | {(2, 5)} if x != 2}


def test_constants_of_an_atom_select_at_the_source_index() -> None:
    """`kind: "up"` becomes the SourceIndex's filter (no Filter node stays above it); a
    content id extension and a comparison with a variable keep working over it."""
    from pomoview.dataflow.operators.filter import Filter
    from pomoview.dataflow.operators.source_index import SourceIndex

    engine = Engine(
        'source a(x: int, y: int, kind: string).\n'
        'r(x: X, y: Y) :- a(x: X, y: Y, kind: "up").\n'
        's(x: X, c: C) :- C := a(x: X, y: X, kind: "up").\n'
    )
    kinds = ("up", "down")
    rows = {(x, y, kinds[(x * y) % 2]) for x in range(4) for y in range(4)}
    engine.write({"a": [{"x": x, "y": y, "kind": k} for x, y, k in rows]})
    assert engine.lookup("r", {"x": 1}) == {(1, y) for x, y, k in rows if x == 1 and k == "up"}
    circuit = engine.readers[("r", ("x",))]
    [index] = [n for n in circuit.nodes if isinstance(n, SourceIndex)]
    assert index.filters == (("kind", "up"),) and index.partial, circuit.explain()
    assert not any(isinstance(n, Filter) for n in circuit.nodes), circuit.explain()
    gone, added = (1, 1, "down"), {(1, 5, "up"), (1, 6, "down")}
    engine.write({"a": [{"x": x, "y": y, "kind": k} for x, y, k in added]},
                 delete={"a": [{"x": 1, "y": 1, "kind": "down"}, {"x": 1, "y": 3, "kind": "down"}]})
    rows = (rows | added) - {gone, (1, 3, "down")}
    for x in range(5):
        assert engine.lookup("r", {"x": x}) == {(x, y) for a, y, k in rows if a == x and k == "up"}
    assert {x for x, _ in engine.read("s")} == {x for x, y, k in rows if x == y and k == "up"}
    # One graph serves both readers: s's index is the full one (r's is keyed by x).
    [index] = [n for n in engine.readers[("s", ())].nodes if isinstance(n, SourceIndex) and not n.partial]
    assert index.filters == (("kind", "up"),)


# -- a recursion that never ends ---------------------------------------------------

def test_a_recursion_past_its_iteration_bound_raises_and_the_engine_recovers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every program the front end accepts reaches a fixed point (content ids inside their
    own recursive stratum are refused), so the child's iteration bound is lowered to make a
    long chain overrun it. The write raises, is applied to the sources, and every other
    relation reads correctly afterwards."""
    from pomoview.dataflow.operators.child import Child, FixedPointNotReached
    from pomoview.planner.builder import circuit_builder as build

    monkeypatch.setattr(build, "Child", lambda outputs, mode: Child(outputs, mode=mode, max_iterations=8))
    engine = Engine(
        """
source e(a: int, b: int).
source u(x: int).
p(a: A, b: B) :- e(a: A, b: B).
p(a: A, b: C) :- p(a: A, b: B), e(a: B, b: C).
copy(x: X) :- u(x: X).
done(x: X)@next :- done(x: X).
done(x: X) :- u(x: X).
"""
    )
    assert engine.read("p") == set() and engine.read("copy") == set()
    engine.write({"u": [{"x": 1}], "e": [{"a": 0, "b": 1}]})
    assert engine.read("p") == {(0, 1)}
    chain = [{"a": i, "b": i + 1} for i in range(1, 30)]
    with pytest.raises(FixedPointNotReached):
        engine.write({"e": chain, "u": [{"x": 2}]})
    assert engine.epoch == 2
    assert engine.read("copy") == {(1,), (2,)}
    engine.write(delete={"e": chain[1:], "u": [{"x": 1}, {"x": 2}]})
    assert engine.read("p") == {(0, 1), (0, 2), (1, 2)}
    assert engine.read("copy") == set()
    assert engine.read("done") == {(1,), (2,)}  # carried by @next across the failed epoch


def test_an_aggregate_grouped_by_a_later_aggregate_is_reordered() -> None:
    """pomo_logic §2.4 lets predicates be reordered: an aggregate grouped by the result of
    one written after it runs after it, and gives what the program in that order gives."""
    written = "source r(a: int).\nsource s(a: int, n: int).\n"
    later = Engine(written + "v(m: M) :- M := count : s(a: N), N := count : r().")
    first = Engine(written + "v(m: M) :- N := count : r(), M := count : s(a: N).")
    rng = random.Random(4)
    for _ in range(6):
        batch = {
            "r": [{"a": rng.randrange(4)} for _ in range(2)],
            "s": [{"a": rng.randrange(4), "n": rng.randrange(3)} for _ in range(3)],
        }
        later.write(insert=batch)
        first.write(insert=batch)
        r = {t[0] for t in first.read("r")}
        s = first.read("s")
        assert later.read("v") == first.read("v") == {(sum(1 for a, _ in s if a == len(r)),)}
