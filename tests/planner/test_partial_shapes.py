"""Each everyday shape of a web application's views is partial where key provenance exists,
read through the same NodeInfo that Stats reports: one lookup leaves only that key's slice in
memory. Answers are checked against the fully materialized engine (partial=False)."""

from __future__ import annotations

import random

import pytest

from pomoview.dataflow.introspect import NodeInfo
from pomoview.engine.engine import Engine

SCHEMA = """
source story(id: int, author_id: int, title: string).
source author(author_id: int, name: string).
source comment(cid: int, story_id: int, text: string).
"""

SHAPES = {
    # view text, lookup key attribute, states expected full (operator names)
    "one side of a join": (
        "storyWithAuthor(id: I, title: T, name: N) :- story(id: I, author_id: A, title: T), "
        "author(author_id: A, name: N).",
        "storyWithAuthor",
        "id",
    ),
    "the other side of a join": (
        "storyWithAuthor(id: I, title: T, name: N) :- story(id: I, author_id: A, title: T), "
        "author(author_id: A, name: N).",
        "storyWithAuthor",
        "name",
    ),
    "a superset of the join columns": (
        "byAuthorTitle(author_id: A, title: T, name: N) :- story(author_id: A, title: T), "
        "author(author_id: A, name: N).",
        "byAuthorTitle",
        "title",
    ),
    "a chain of joins": (
        "thread(cid: C, text: X, title: T, name: N) :- comment(cid: C, story_id: S, text: X), "
        "story(id: S, author_id: A, title: T), author(author_id: A, name: N).",
        "thread",
        "cid",
    ),
    "a semijoin and an antijoin": (
        "quiet(id: I, title: T) :- story(id: I, author_id: A, title: T), author(author_id: A), "
        "!comment(story_id: I).",
        "quiet",
        "id",
    ),
    "a union of two joins": (
        "mentions(id: I, who: N) :- story(id: I, author_id: A), author(author_id: A, name: N).\n"
        "mentions(id: I, who: X) :- comment(story_id: I, text: X).",
        "mentions",
        "id",
    ),
    "an aggregate by a body column": (
        "storyCount(name: N, n: K) :- author(author_id: A, name: N), K := count : story(author_id: A).",
        "storyCount",
        "name",
    ),
    "an aggregate by its group": (
        "perAuthor(author_id: A, n: K) :- author(author_id: A), K := count : story(author_id: A).",
        "perAuthor",
        "author_id",
    ),
    "a content id and a projection": (
        "tagged(id: I, c: C) :- story(id: I, author_id: A), C := author(author_id: A).",
        "tagged",
        "id",
    ),
}


def data(rng: random.Random) -> dict[str, list[dict[str, object]]]:
    authors = [{"author_id": a, "name": f"name{a % 10}"} for a in range(12)]
    stories = [{"id": s, "author_id": rng.randrange(12), "title": f"t{s % 9}"} for s in range(60)]
    comments = [{"cid": c, "story_id": rng.randrange(60), "text": f"x{c % 5}"} for c in range(40)]
    return {"author": authors, "story": stories, "comment": comments}


def stateful(engine: Engine) -> list[NodeInfo]:
    return [n for n in engine.graph.graph.node_infos() if n.stateful]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_shape_is_partial_and_holds_one_slice(shape: str) -> None:
    rule, view, attr = SHAPES[shape]
    program = SCHEMA + f"view {view}({attr}).\n" + rule + "\n"
    rng = random.Random(7)
    partial, full = Engine(program), Engine(program, partial=False)
    rows = data(rng)
    for engine in (partial, full):
        engine.write(rows)
    key_value = next(iter(full.read(view)))[full.attributes(view).index(attr)]
    got = partial.lookup(view, {attr: key_value})
    assert got == full.lookup(view, {attr: key_value}) and got

    states = stateful(partial)
    assert states and all(n.partial for n in states), [(n.detail, n.partial) for n in states]
    reader = [n for n in states if n.operator == "Reader"]
    assert [n.present_keys for n in reader] == [1]
    held = sum(n.rows for n in states)
    whole = sum(n.rows for n in stateful(full))
    assert held * 3 < whole, f"{shape}: {held} rows held after one lookup, {whole} when full"

    # Writes all over: only keys that are present are kept, and answers stay exact.
    for epoch in range(6):
        ins = {"story": [{"id": 100 + epoch, "author_id": rng.randrange(12), "title": "new"}],
               "comment": [{"cid": 500 + epoch, "story_id": rng.randrange(60), "text": "hi"}],
               "author": [{"author_id": rng.randrange(12), "name": f"renamed{epoch}"}]}
        dels = {"story": [rows["story"][epoch]], "comment": [rows["comment"][epoch]]}
        for engine in (partial, full):
            engine.write(ins, dels)
        column = full.attributes(view).index(attr)
        for value in {key_value, *[r[column] for r in list(full.read(view))[:3]]}:
            want = full.lookup(view, {attr: value})
            assert partial.lookup(view, {attr: value}) == want, (shape, epoch, value)
    partial.graph.graph.check_invariants()
    assert sum(n.dropped for n in stateful(partial)) > 0, "writes at keys nobody asked for are dropped"


def test_full_where_there_is_no_provenance() -> None:
    """A key made of columns of both join inputs (not the join columns) and a key on an
    aggregate's value have no provenance: those states are full, and still exact."""
    program = SCHEMA + (
        "pair(title: T, name: N) :- story(author_id: A, title: T), author(author_id: A, name: N).\n"
        "perAuthor(author_id: A, n: K) :- author(author_id: A), K := count : story(author_id: A).\n"
    )
    partial, full = Engine(program), Engine(program, partial=False)
    rows = data(random.Random(3))
    for engine in (partial, full):
        engine.write(rows)
    assert partial.lookup("pair", {"title": "t1", "name": "name2"}) == full.lookup(
        "pair", {"title": "t1", "name": "name2"}
    )
    assert partial.lookup("perAuthor", {"n": 5}) == full.lookup("perAuthor", {"n": 5})
    modes = {(n.operator, n.partial) for n in stateful(partial) if n.operator != "Reader"}
    assert ("Join", False) in modes and ("AggregateJoin", False) in modes


def test_a_second_view_over_the_same_join_adds_only_its_reader() -> None:
    """Readers share the states of their common sub-plan (one per operator and key): a second
    view over the same join, by the same key, adds its reader and nothing else."""
    rule = (
        "a(id: I, title: T, name: N) :- story(id: I, author_id: A, title: T), "
        "author(author_id: A, name: N).\n"
        "b(id: I, name: N) :- a(id: I, name: N).\n"
    )
    engine = Engine(SCHEMA + rule)
    engine.write(data(random.Random(1)))
    engine.lookup("a", {"id": 3})
    before = {n.id for n in stateful(engine)}
    engine.lookup("b", {"id": 3})
    after = stateful(engine)
    added = [n for n in after if n.id not in before]
    # b's own distinct (a projection of a) and its reader; the join and sources are a's.
    assert [n.operator for n in added] == ["DistinctIncremental", "Reader"], [n.detail for n in added]
    shared = [n for n in after if n.operator == "Join"]
    assert len(shared) == 1 and shared[0].views == ["a", "b"]


def test_a_keyed_write_whose_join_key_is_missing_evicts_the_key_below() -> None:
    """Story 3 moves to an author whose row no state holds: the join cannot join the new row
    (a write never upqueries), so it evicts story 3 here and at the reader (Noria's join
    eviction); the next lookup upqueries it again and sees the new author."""
    rule = (
        "view storyWithAuthor(id).\n"
        "storyWithAuthor(id: I, title: T, name: N) :- story(id: I, author_id: A, title: T), "
        "author(author_id: A, name: N).\n"
    )
    engine = Engine(SCHEMA + rule)
    engine.write({"author": [{"author_id": 1, "name": "ann"}, {"author_id": 2, "name": "bob"}],
                  "story": [{"id": 3, "author_id": 1, "title": "t"}]})
    assert engine.lookup("storyWithAuthor", {"id": 3}) == {(3, "t", "ann")}
    [join] = [n for n in stateful(engine) if n.operator == "Join"]
    assert join.partial and join.evictions == 0 and join.present_keys == 2  # story 3, author 1
    engine.write({"story": [{"id": 3, "author_id": 2, "title": "t"}]},
                 {"story": [{"id": 3, "author_id": 1, "title": "t"}]})
    states = {n.operator: n for n in stateful(engine)}
    assert states["Join"].evictions == 1 and states["Reader"].evictions == 1
    assert states["Reader"].present_keys == 0
    assert engine.lookup("storyWithAuthor", {"id": 3}) == {(3, "t", "bob")}
    engine.graph.graph.check_invariants()
