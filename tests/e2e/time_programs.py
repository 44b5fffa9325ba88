"""Small programs with `@next` rules and transient sources, random epochs of writes for them,
and the in-process engine's answers as the oracle (shared by the scheduler and e2e tests)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from pomoview.engine.engine import Engine

# pomo_logic §2.1's checkbox, with the initial state as an event (tests/planner/
# test_spec_examples.py says why) and a view to look it up by.
CHECKBOX = """
transient source clicks(id: int).
transient source created(id: int, state: bool).
view checkbox(id).
checkbox(id: Id, state: S) :- created(id: Id, state: S).
checkbox(id: Id, state: S)@next     :- checkbox(id: Id, state: S), !clicks(id: Id).
checkbox(id: Id, state: true)@next  :- checkbox(id: Id, state: false), clicks(id: Id).
checkbox(id: Id, state: false)@next :- checkbox(id: Id, state: true), clicks(id: Id).
"""

# A persistent source under @next (a point once seen stays seen), and an aggregate over a
# transient source next to it.
SEEN = """
source point(x: int, y: int).
transient source ping(x: int).
view seen(x).
view pinged(x).
seen(x: X, y: Y) :- point(x: X, y: Y).
seen(x: X, y: Y)@next :- seen(x: X, y: Y).
pinged(x: X, n: N) :- point(x: X), N := count : ping(x: X).
"""

# Relations with @next rules only, negation of a transient source, and a join of a
# persistent source with @next state.
LATCH = """
source member(g: int, id: int).
transient source press(id: int).
transient source reset(id: int).
view active(g).
view latched(id).
latched(id: I)@next :- press(id: I).
latched(id: I)@next :- latched(id: I), !reset(id: I).
active(g: G, id: I) :- member(g: G, id: I), latched(id: I).
"""

PROGRAMS = {"checkbox": CHECKBOX, "seen": SEEN, "latch": LATCH}
DOMAIN = range(4)

Rows = dict[str, list[dict[str, object]]]


@dataclass
class Epoch:
    inserts: Rows
    deletes: Rows


def random_epoch(name: str, rng: random.Random) -> Epoch:
    """One batch of writes for program `name` (often empty: time advances all the same)."""
    ins: Rows = {}
    dels: Rows = {}
    if rng.random() < 0.2:
        return Epoch(ins, dels)

    def some(n: int) -> list[int]:
        return rng.sample(list(DOMAIN), rng.randint(0, n))

    if name == "checkbox":
        ins["clicks"] = [{"id": i} for i in some(3)]
        ins["created"] = [{"id": i, "state": rng.random() < 0.5} for i in some(1)]
    elif name == "seen":
        pts = {(x, y) for x in some(2) for y in some(2)}
        gone = {(x, y) for x in some(2) for y in some(2)} - pts
        ins["point"] = [{"x": x, "y": y} for x, y in sorted(pts)]
        dels["point"] = [{"x": x, "y": y} for x, y in sorted(gone)]
        ins["ping"] = [{"x": x} for x in some(3)]
    else:
        pairs = {(g, i) for g in some(2) for i in some(2)}
        gone = {(g, i) for g in some(2) for i in some(1)} - pairs
        ins["member"] = [{"g": g, "id": i} for g, i in sorted(pairs)]
        dels["member"] = [{"g": g, "id": i} for g, i in sorted(gone)]
        ins["press"] = [{"id": i} for i in some(2)]
        ins["reset"] = [{"id": i} for i in some(1)]
    return Epoch({s: r for s, r in ins.items() if r}, {s: r for s, r in dels.items() if r})


def expected(engine: Engine) -> dict[tuple[str, int], set[tuple[object, ...]]]:
    """Every view's rows for every key of the domain, by the engine."""
    out = {}
    for view, key in engine.program.views.items():
        [attr] = key
        for value in DOMAIN:
            out[(view, value)] = engine.lookup(view, {attr: value})
    return out
