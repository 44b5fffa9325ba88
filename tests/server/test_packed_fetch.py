"""The packed upquery path over real Spark: a source of two int attributes asked by one of
them (votes by article) is read as Arrow and filled as packed groups, advanced by the logged
writes after its Spark job's version. Writes race a held job (inserts, deletes, a re-insert,
a flush); the answers equal a Python model, and the source index holds the key packed."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

from pomoview.dataflow.state.keyed_state import PackedGroup
from pomoview.server.scheduler.scheduler import Scheduler

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: I, title: T, votes: N) :- article(id: I, title: T), N := count : vote(article_id: I).
view voters(article_id).
voters(article_id: A, user_id: U) :- vote(article_id: A, user_id: U).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def test_a_packed_fill_advanced_by_writes_that_race_its_job(tmp_path: Path, spark: Any) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(VOTES)
        present: set[tuple[int, int]] = set()
        s.write([("article", [row(id=i, title=f"a{i}") for i in range(3)], [])])
        first = [(1, u) for u in range(500)] + [(2, u) for u in range(30)]
        epoch = s.write([("vote", [row(article_id=a, user_id=u) for a, u in first], [])])
        present.update(first)
        s.lookup("articleWithVotes", [row(id=0)], min_epoch=epoch)  # applied: the flush takes it
        assert s.flush() == epoch
        # Some votes inserted again (no change to the set) into a second part: the store's
        # answer repeats them, the index must not.
        again = [(1, u) for u in range(0, 500, 3)]
        epoch = s.write([("vote", [row(article_id=a, user_id=u) for a, u in again], [])])
        s.lookup("articleWithVotes", [row(id=0)], min_epoch=epoch)
        assert s.flush() == epoch
        fetch_columns = s.store.fetch_columns
        started, release = threading.Event(), threading.Event()
        answered: list[str] = []

        def held(*args: Any, **kwargs: Any) -> Any:
            started.set()
            assert release.wait(60)
            version, got = fetch_columns(*args, **kwargs)
            answered.append(type(got).__name__)
            return version, got

        s.store.fetch_columns = held  # type: ignore[method-assign]
        answer: list[Any] = []
        lookup = threading.Thread(target=lambda: answer.append(s.lookup("articleWithVotes", [row(id=1)])))
        lookup.start()
        try:
            assert started.wait(60)
            # After the job's snapshot: new votes, deletes of snapshot votes, a vote deleted
            # and inserted again, a key nobody asked for; then a flush moves it all to Parquet.
            ops = [
                ([(1, u) for u in range(500, 520)], [(1, u) for u in range(0, 40)]),
                ([(1, 7)], [(1, 500)]),
                ([(2, 99), (1, 0)], []),
            ]
            for inserts, deletes in ops:
                s.write([("vote", [row(article_id=a, user_id=u) for a, u in inserts],
                          [row(article_id=a, user_id=u) for a, u in deletes])])
                present.difference_update(deletes)
                present.update(inserts)
            s.flush()
        finally:
            release.set()
            lookup.join(60)
        s.store.fetch_columns = fetch_columns  # type: ignore[method-assign]
        assert answered == ["Table"], "the job answered in Arrow columns: the packed path"
        votes = Counter(a for a, _ in present)
        rows, _ = answer[0]
        assert rows == [[{"id": 1, "title": "a1", "votes": votes[1]}]]
        # The vote index holds article 1 packed, and exactly the present votes.
        index = next(n for n in s.graph.graph.nodes if n.describe().startswith("SourceIndex(vote"))  # type: ignore[union-attr]
        group = index.state.get((1,))  # type: ignore[attr-defined]
        assert isinstance(group, PackedGroup)
        assert set(group) == {t for t in present if t[0] == 1}
        # Later writes keep it exact; a second view reads the same rows.
        epoch = s.write([("vote", [row(article_id=1, user_id=1000)], [row(article_id=1, user_id=7)])])
        present.add((1, 1000))
        present.discard((1, 7))
        rows, _ = s.lookup("articleWithVotes", [row(id=1), row(id=2)], min_epoch=epoch)
        votes = Counter(a for a, _ in present)
        assert [r[0]["votes"] for r in rows] == [votes[1], votes[2]]
        voters, _ = s.lookup("voters", [row(article_id=1)])
        assert {(r["article_id"], r["user_id"]) for r in voters[0]} == {t for t in present if t[0] == 1}
    finally:
        s.stop()
