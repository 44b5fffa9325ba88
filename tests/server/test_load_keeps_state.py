"""A bulk load keeps the warm state (server/scheduler/scheduler.py `load`, dataflow/graph.py
`Graph.evict_loaded`): the keys its rows touch are evicted, here and below, and refill from
the store; every other key stays present, with the same answer, served as a hit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.errors import Unavailable
from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VIEW, VOTES, encode, row


def test_a_load_evicts_the_keys_it_touches_and_keeps_the_others(tmp_path: Path, spark: Any) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(VOTES)
        votes: Counter[int] = Counter()
        written = [(a, u) for a in range(1, 7) for u in range(a)]
        votes.update(a for a, _ in written)
        epoch = s.write([
            ("article", [row(id=a, title=f"t{a}") for a in range(1, 7)], []),
            ("vote", [row(article_id=a, user_id=u) for a, u in written], []),
        ])
        keys = [row(id=a) for a in range(1, 7)]
        s.lookup(VIEW, keys, min_epoch=epoch)  # all six warm
        path = tmp_path / "votes.csv"
        loaded = [(a, 100 + u) for a in (2, 4) for u in range(3)]
        path.write_text("article_id,user_id\n" + "".join(f"{a},{u}\n" for a, u in loaded))
        count, load_epoch = s.load("vote", str(path))
        assert count == len(loaded) and load_epoch > epoch
        votes.update(a for a, _ in loaded)

        def answer(a: int) -> list[dict[str, object]]:  # the oracle: a count of the votes
            return [{"id": a, "title": f"t{a}", "votes": votes[a]}]

        graph = s.graph
        assert graph is not None
        reader = graph.graph.readers[(VIEW, ("id",))]
        present = {a for a in range(1, 7) if reader.state.is_present((a,))}
        assert present == {1, 3, 5, 6}, present  # the untouched keys stayed; 2 and 4 went
        for a in (1, 3, 5, 6):  # served from the kept state, without the lock
            hit = s.hits(VIEW, [row(id=a)], load_epoch, encode)
            assert hit == ([encode([(a, f"t{a}", votes[a])])], load_epoch), (a, hit)
        got, at = s.lookup(VIEW, keys)
        assert at == load_epoch and got == [answer(a) for a in range(1, 7)]
        graph.graph.check_invariants()
    finally:
        s.stop()


def test_a_load_touching_a_subscribed_key_rebuilds_and_ends_the_subscriptions(
    tmp_path: Path, spark: Any
) -> None:
    """A subscribed key cannot be evicted (its subscriber would miss the change): the load
    rebuilds the dataflow, as it always did, and the subscription ends."""
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(VOTES)
        epoch = s.write([("article", [row(id=1, title="a"), row(id=2, title="b")], [])])
        s.lookup(VIEW, [row(id=1), row(id=2)], min_epoch=epoch)
        _, _, sub = s.subscribe(VIEW, [row(id=1)])
        path = tmp_path / "votes.csv"
        path.write_text("article_id,user_id\n1,7\n")
        s.load("vote", str(path))
        with pytest.raises(Unavailable, match="rebuilt"):
            sub.next(timeout=30)  # the subscription ended
        got, _ = s.lookup(VIEW, [row(id=1), row(id=2)])
        assert got == [[{"id": 1, "title": "a", "votes": 1}], [{"id": 2, "title": "b", "votes": 0}]]
        s.unsubscribe(sub)
    finally:
        s.stop()
