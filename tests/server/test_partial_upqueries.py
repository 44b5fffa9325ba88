"""Partial state through the scheduler over real Spark: a union's parents fetched together
while writes race their jobs, and a join chain's dependent upqueries, read through Stats."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pomoview.server.scheduler.scheduler import Scheduler

PROGRAM = """
source story(id: int, author_id: int, title: string).
source author(author_id: int, name: string).
source comment(cid: int, story_id: int, text: string).
source note(sid: int, text: string).
view thread(cid).
thread(cid: C, text: X, title: T, name: N) :- comment(cid: C, story_id: S, text: X),
    story(id: S, author_id: A, title: T), author(author_id: A, name: N).
view said(id).
said(id: I, text: X) :- comment(story_id: I, text: X).
said(id: I, text: X) :- note(sid: I, text: X).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def test_a_union_fills_only_once_every_parent_answered_with_writes_racing_its_jobs(
    tmp_path: Path, spark: Any
) -> None:
    """`said` unions comment and note: one round fetches both parents as two Spark jobs side
    by side. Both jobs are held while writes to both parents go on (and a flush moves them
    into the store); the answer holds every write exactly once."""
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(PROGRAM)
        first = s.write([
            ("comment", [row(cid=1, story_id=7, text="c1"), row(cid=2, story_id=8, text="c2")], []),
            ("note", [row(sid=7, text="n1")], []),
        ])
        s.lookup("said", [row(id=0)], min_epoch=first)  # applied (key 0 is not 7: no share)
        assert s.flush() == first
        fetch = s.store.fetch
        started: list[str] = []
        both, release = threading.Barrier(2, timeout=20), threading.Event()

        def held(source: str, *args: Any, **kwargs: Any) -> Any:
            started.append(source)
            both.wait()  # the two parents' jobs run at the same time
            assert release.wait(60)
            return fetch(source, *args, **kwargs)

        s.store.fetch = held  # type: ignore[method-assign]
        answer: list[Any] = []
        lookup = threading.Thread(target=lambda: answer.append(s.lookup("said", [row(id=7)])))
        lookup.start()
        try:
            deadline = time.monotonic() + 60
            while len(started) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sorted(started) == ["comment", "note"], "the parents' jobs run side by side"
            # Writes to both parents while their jobs run: one is in the snapshot's future,
            # one deletes a tuple the snapshot holds, one touches another key.
            s.write([("comment", [row(cid=3, story_id=7, text="c3")], [row(cid=1, story_id=7, text="c1")])])
            last = s.write([("note", [row(sid=7, text="n2"), row(sid=8, text="n3")], [])])
            s.flush()
        finally:
            release.set()
            lookup.join(60)
        assert sorted(started) == ["comment", "note"]
        rows, epoch = answer[0]
        assert epoch >= last
        assert sorted(r["text"] for r in rows[0]) == ["c3", "n1", "n2"]
        # The key stays present and exact under later writes to either parent.
        s.store.fetch = fetch  # type: ignore[method-assign]
        e = s.write([
            ("note", [], [row(sid=7, text="n1")]),
            ("comment", [row(cid=4, story_id=7, text="c4")], []),
        ])
        jobs = s.counters.spark_jobs
        again, _ = s.lookup("said", [row(id=7)], min_epoch=e)
        assert sorted(r["text"] for r in again[0]) == ["c3", "c4", "n2"]
        assert s.counters.spark_jobs == jobs, "a present key answers without Spark"
    finally:
        s.stop()


def test_a_chain_is_partial_end_to_end_and_its_dependent_upqueries_take_a_round_each(
    tmp_path: Path, spark: Any
) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(PROGRAM)
        first = s.write([
            ("author", [row(author_id=a, name=f"a{a}") for a in range(20)], []),
            ("story", [row(id=i, author_id=i % 20, title=f"t{i}") for i in range(100)], []),
            ("comment", [row(cid=c, story_id=c % 100, text=f"x{c}") for c in range(400)], []),
        ])
        s.view_state.wait_applied(first, None)
        assert s.flush() == first
        jobs = s.counters.spark_jobs
        rows, _ = s.lookup("thread", [row(cid=123)])
        assert rows == [[{"cid": 123, "text": "x123", "title": "t23", "name": "a3"}]]
        # comment by cid, then story by the comment's story_id, then author by author_id.
        assert s.counters.spark_jobs - jobs == 3
        stateful = [n for n in s.stats().states if n.stateful]
        assert stateful and all(n.partial for n in stateful), [(n.detail, n.partial) for n in stateful]
        assert sum(n.rows for n in stateful) < 30, [(n.detail, n.rows) for n in stateful]
        # A write to the author of the present comment reaches it; one to another author is dropped.
        dropped = s.stats().dropped_deltas
        e = s.write([("author", [row(author_id=3, name="renamed"), row(author_id=4, name="other")],
                      [row(author_id=3, name="a3"), row(author_id=4, name="a4")])])
        rows, _ = s.lookup("thread", [row(cid=123)], min_epoch=e)
        assert rows == [[{"cid": 123, "text": "x123", "title": "t23", "name": "renamed"}]]
        assert s.stats().dropped_deltas > dropped
    finally:
        s.stop()
