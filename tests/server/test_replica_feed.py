"""The hit replica's copy of the readers (server/replica/feed.py -> server/replica/table.py)
against its oracle, the server's own readers: after random writes, lookups (fills),
evictions and installs, run by a real scheduler over real Spark, the copy holds exactly the
readers' present keys with their rows, at the applied epoch. The feed and the table speak
over a real socket pair, as in the server; the test synchronizes on the feed's count of
messages sent and the table's count applied, never on time."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.metrics.metrics import Metrics
from pomoview.server.replica.feed import ReplicaFeed
from pomoview.server.replica.messages import Reads
from pomoview.server.replica.table import ReplicaTable
from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VOTES, row

# The vote view, and an ordered view with a limit (its reader is a TopK).
PROGRAM = (
    VOTES
    + """
source story(author: int, id: int, created: int).
view newest(author) order by created desc, id limit 2.
newest(author: A, id: I, created: C) :- story(author: A, id: I, created: C).
"""
)


class Replica:
    """The replica's side in this process: a thread applying what the feed sends."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.table = ReplicaTable()
        self.applied = 0
        self._moved = threading.Condition()
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                if not self.conn.poll(0.05):  # so that `stop` ends the thread before the close
                    continue
                messages = self.conn.recv()
                for message in messages:
                    self.table.apply(message)
                with self._moved:
                    self.applied += 1  # one batch
                    self._moved.notify_all()
        except (EOFError, OSError):
            return

    def caught_up(self, feed: ReplicaFeed) -> None:
        feed.sent()
        with self._moved:
            assert self._moved.wait_for(lambda: self.applied == feed.batches_sent, timeout=30)


@pytest.fixture
def fed(tmp_path: Path, spark: Any) -> Iterator[tuple[Scheduler, ReplicaFeed, Replica]]:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    ours, theirs = Pipe()
    feed = ReplicaFeed(s.view_state, ours, Metrics(), on_lost=lambda: None)
    replica = Replica(theirs)
    feed.start()
    try:
        yield s, feed, replica
    finally:
        feed.stop()
        replica.stop()
        theirs.close()
        feed.close()
        s.stop()


def check_copy(s: Scheduler, feed: ReplicaFeed, replica: Replica) -> int:
    """The copy equals the readers, key for key, at the applied epoch; returns the keys."""
    with s.view_state.lock:
        pass  # a release of the lock: whatever changed is queued now
    replica.caught_up(feed)
    keys = 0
    with s.view_state.lock:
        assert replica.table.epoch == s.view_state.applied_epoch
        graph = s.view_state.graph
        assert graph is not None
        for name, reader in graph.graph.readers.items():
            want = {key: reader.rows_of(key) for key in reader.state.keys()}
            assert replica.table.keys(name) == want, name
            keys += len(want)
    return keys


def test_the_copy_equals_the_readers_under_random_writes_lookups_and_evictions(
    fed: tuple[Scheduler, ReplicaFeed, Replica],
) -> None:
    s, feed, replica = fed
    s.install(PROGRAM)
    rng = random.Random(7)
    articles: set[int] = set()
    votes: set[tuple[int, int]] = set()
    stories: set[tuple[int, int, int]] = set()
    epoch = 0
    seen_keys = 0
    for step in range(60):
        op = rng.random()
        if op < 0.5:
            new_votes = {(rng.randrange(8), rng.randrange(30)) for _ in range(rng.randrange(1, 6))} - votes
            gone = set(rng.sample(sorted(votes), min(len(votes), rng.randrange(3))))
            new_articles = {rng.randrange(8)} - articles
            new_stories = {(rng.randrange(3), rng.randrange(100), rng.randrange(50))} - stories
            gone_stories = set(rng.sample(sorted(stories), min(len(stories), rng.randrange(2))))
            epoch = s.write(
                [
                    ("article", [row(id=a, title=f"t{a}") for a in new_articles], []),
                    (
                        "vote",
                        [row(article_id=a, user_id=u) for a, u in new_votes],
                        [row(article_id=a, user_id=u) for a, u in gone],
                    ),
                    (
                        "story",
                        [row(author=a, id=i, created=c) for a, i, c in new_stories],
                        [row(author=a, id=i, created=c) for a, i, c in gone_stories],
                    ),
                ]
            )
            articles |= new_articles
            votes = (votes | new_votes) - gone
            stories = (stories | new_stories) - gone_stories
        elif op < 0.8:
            s.lookup("articleWithVotes", [row(id=rng.randrange(8))], min_epoch=epoch)
            s.lookup("newest", [row(author=rng.randrange(3))], min_epoch=epoch)
        else:
            with s.view_state.lock:
                graph = s.view_state.graph
                assert graph is not None
                if rng.random() < 0.5:
                    graph.graph.evict(rng.randrange(1, 5000))  # LRU across the states
                else:  # a reader's own key, as the budget may pick
                    reader = rng.choice(list(graph.graph.readers.values()))
                    present = reader.state.keys()
                    if present:
                        reader.evict_own([rng.choice(present)])
        if step % 5 == 4:
            s.view_state.wait_applied(epoch, None)
            seen_keys = max(seen_keys, check_copy(s, feed, replica))
    s.view_state.wait_applied(epoch, None)
    check_copy(s, feed, replica)
    assert seen_keys > 0  # the copy was checked while it held keys, not only empty


def test_a_new_program_empties_the_copy(fed: tuple[Scheduler, ReplicaFeed, Replica]) -> None:
    s, feed, replica = fed
    s.install(VOTES)
    epoch = s.write([("article", [row(id=1, title="a")], [])])
    s.lookup("articleWithVotes", [row(id=1)], min_epoch=epoch)
    assert check_copy(s, feed, replica) == 1
    s.install(VOTES.replace("votes: N", "votes: N, title2: Title"))
    check_copy(s, feed, replica)
    assert replica.table.keys(("articleWithVotes", ("id",))) == {}
    assert replica.table.relations is not None
    assert "title2" in replica.table.relations["articleWithVotes"].attributes


def test_the_replicas_reads_mark_the_keys_and_count_as_hits(
    fed: tuple[Scheduler, ReplicaFeed, Replica],
) -> None:
    s, feed, _ = fed
    s.install(VOTES)
    epoch = s.write([("article", [row(id=1, title="a"), row(id=2, title="b")], [])])
    s.lookup("articleWithVotes", [row(id=1), row(id=2)], min_epoch=epoch)
    with s.view_state.lock:
        graph = s.view_state.graph
        assert graph is not None
        reader = graph.graph.readers[("articleWithVotes", ("id",))]
        reader.state.hot.clear()
    feed.apply_reads(Reads(3, [(("articleWithVotes", ("id",)), [(2,)])]))
    assert feed.replica_hits == 3
    assert reader.state.hot == {(2,)}
