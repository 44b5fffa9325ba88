"""Subscriptions without gRPC or Spark (server/subscriptions.py): the changes captured at the
reader, sealed per epoch into a bounded buffer, against a full graph's recomputation; an
overflow ends the subscription with RESOURCE_EXHAUSTED naming the limit and releases its keys,
without ever waiting; a reset ends it with UNAVAILABLE after what was buffered."""

from __future__ import annotations

import random

import pytest

from pomoview.dataflow.node import Filters
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import ProgramGraph, compile_program
from pomoview.server.errors import ResourceExhausted, Unavailable
from pomoview.server.views.subscriptions import Subscriptions

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: I, title: T, votes: N) :- article(id: I, title: T), N := count : vote(article_id: I).
"""
VIEW = ("articleWithVotes", ("id",))


class Sources:
    """The base relations, as sets, with a fetch over them (a stand-in for the store)."""

    def __init__(self) -> None:
        self.rows: dict[str, set[Row]] = {"article": set(), "vote": set()}

    def fetch(self, source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
        wanted = set(keys)
        return [r for r in self.rows[source] if not names or (r[0],) in wanted]

    def change(self, source: str, row: Row, weight: int) -> ZSet[Row] | None:
        rows = self.rows[source]
        if (weight > 0) == (row in rows):
            return None  # a set: inserting a present row or deleting an absent one is no change
        (rows.add if weight > 0 else rows.discard)(row)
        z: ZSet[Row] = ZSet()
        z.add(row, weight)
        return z


def random_epoch(rng: random.Random, sources: Sources) -> dict[str, ZSet[Row]]:
    out: dict[str, ZSet[Row]] = {}
    for _ in range(rng.randrange(1, 6)):
        kind = rng.random()
        key = rng.randrange(8)
        if kind < 0.5:
            source, row, weight = "vote", (key, rng.randrange(6)), rng.choice((1, 1, -1))
        else:  # articles appear, vanish and are retitled (a delete and an insert)
            source, row, weight = "article", (key, rng.choice("ab")), rng.choice((1, -1))
        if source in out and any(r == row for r, _ in out[source].items()):
            continue
        z = sources.change(source, row, weight)
        if z is not None:
            out.setdefault(source, ZSet()).extend(z)
    return out


def test_snapshot_plus_sealed_changes_equal_the_recomputed_view() -> None:
    rng = random.Random(11)
    sources = Sources()
    graph = ProgramGraph(compile_program(VOTES), partial=True)
    subs = Subscriptions(limit=1000)
    keys = [(0,), (1,), (5,)]
    for epoch in range(1, 301):
        if epoch == 40:  # subscribe mid-way: the keys are filled from the sources then
            snapshot = graph.lookup(*VIEW, keys, sources.fetch)
            sub = subs.attach("articleWithVotes", graph.graph.readers[VIEW], keys)
            held = {row for group in snapshot for row in group}
            seen = epoch - 1
        graph.step(random_epoch(rng, sources))
        subs.seal(epoch)
        if epoch >= 40:
            while (item := sub.next(timeout=0)) is not None:
                at, changes = item
                assert seen < at <= epoch
                seen = at
                for row, weight in changes:
                    assert weight in (1, -1)
                    (held.add if weight > 0 else held.remove)(row)
            full = ProgramGraph(compile_program(VOTES), partial=False)
            expected = {row for group in full.lookup(*VIEW, keys, sources.fetch) for row in group}
            assert held == expected, f"epoch {epoch}"


def test_an_overflow_ends_the_subscription_naming_the_limit_and_releases_its_keys() -> None:
    sources = Sources()
    graph = ProgramGraph(compile_program(VOTES), partial=True)
    for i in range(4):
        graph.step({"article": sources.change("article", (i, "t"), 1)})  # type: ignore[dict-item]
    graph.lookup(*VIEW, [(0,), (1,)], sources.fetch)
    reader = graph.graph.readers[VIEW]
    subs = Subscriptions(limit=5)
    sub = subs.attach("articleWithVotes", reader, [(0,), (1,)])
    # Each epoch changes 4 rows (two keys, a delete and an insert each); the first fills the
    # empty buffer, the second would pass 5: the subscription ends, nobody having read.
    for epoch, user in ((1, 100), (2, 101)):
        z: ZSet[Row] = ZSet()
        for k in (0, 1):
            z.extend(sources.change("vote", (k, user), 1))  # type: ignore[arg-type]
        graph.step({"vote": z})
        subs.seal(epoch)
    assert subs.overflows == 1 and subs.open == []
    assert not reader.taps and not reader.state.pinned
    with pytest.raises(ResourceExhausted, match="limit of 5 changed rows"):
        sub.next(timeout=0)


def test_a_reset_ends_every_subscription_after_what_it_buffered() -> None:
    sources = Sources()
    graph = ProgramGraph(compile_program(VOTES), partial=True)
    graph.step({"article": sources.change("article", (0, "t"), 1)})  # type: ignore[dict-item]
    graph.lookup(*VIEW, [(0,)], sources.fetch)
    subs = Subscriptions()
    sub = subs.attach("articleWithVotes", graph.graph.readers[VIEW], [(0,)])
    graph.step({"vote": sources.change("vote", (0, 1), 1)})  # type: ignore[dict-item]
    subs.seal(7)
    subs.reset("the dataflow was rebuilt")
    item = sub.next(timeout=0)
    assert item is not None and item[0] == 7
    with pytest.raises(Unavailable, match="rebuilt; subscribe again"):
        sub.next(timeout=0)


def test_subscriptions_past_the_limit_are_refused_until_one_closes() -> None:
    sources = Sources()
    graph = ProgramGraph(compile_program(VOTES), partial=True)
    graph.lookup(*VIEW, [(0,)], sources.fetch)
    reader = graph.graph.readers[VIEW]
    subs = Subscriptions(max_open=2)
    first = subs.attach("articleWithVotes", reader, [(0,)])
    subs.attach("articleWithVotes", reader, [(0,)])
    with pytest.raises(ResourceExhausted, match="too many open subscriptions .*limit is 2"):
        subs.attach("articleWithVotes", reader, [(0,)])
    assert reader.state.pinned == {(0,): 2}
    first.close()
    subs.detach(first)
    subs.detach(first)  # idempotent
    subs.attach("articleWithVotes", reader, [(0,)])
    assert reader.state.pinned == {(0,): 2}
