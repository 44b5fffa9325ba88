"""Lookups of present keys without the dataflow lock (`Scheduler.hits`), while epochs are
applied: every answer is the state at the one epoch it names (a sequence lock), never a mix of
two, and the cached wire form of a key follows every write to it. The reference is a Python
model of the counts after each epoch."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pomoview.server.scheduler.scheduler import Scheduler

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: I, title: T, votes: N) :- article(id: I, title: T), N := count : vote(article_id: I).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def encode(rows: list[tuple[object, ...]]) -> bytes:
    return repr(sorted(rows)).encode()


def test_lock_free_hits_answer_one_epoch_while_writes_apply(tmp_path: Path, spark: Any) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(VOTES)
        s.write([("article", [row(id=i, title=f"a{i}") for i in range(3)], [])])
        keys = [row(id=1), row(id=2)]
        s.lookup("articleWithVotes", keys)  # fills both keys
        counts: dict[int, int] = {}  # epoch -> votes of article 1 (= of article 2)
        epoch = s.applied_epoch
        counts[epoch] = 0
        seen: list[tuple[list[bytes], int]] = []
        done = threading.Event()

        def reader() -> None:
            while not done.is_set():
                hit = s.hits("articleWithVotes", keys, None, encode)
                if hit is not None:
                    seen.append(hit)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        total = 0
        for n in range(150):
            # Each epoch moves both keys (and deletes as often as it inserts, later on).
            if n % 3 == 2:
                gone = [row(article_id=1, user_id=n - 1), row(article_id=2, user_id=n - 1)]
                epoch = s.write([("vote", [], gone)])
                total -= 1
            else:
                epoch = s.write([("vote", [row(article_id=1, user_id=n), row(article_id=2, user_id=n)], [])])
                total += 1
            counts[epoch] = total
        s.lookup("articleWithVotes", keys, min_epoch=epoch)
        done.set()
        for t in threads:
            t.join(30)
        assert len(seen) > 100, "the readers answered without the lock"
        epochs = {e for _, e in seen}
        assert len(epochs) > 10, "answers were read across many epochs"
        for answers, at in seen:
            want = counts[at]
            assert answers == [encode([(1, "a1", want)]), encode([(2, "a2", want)])], (at, answers)
        # The last answer is the last epoch's, from the cache.
        final = s.hits("articleWithVotes", keys, None, encode)
        assert final == ([encode([(1, "a1", total)]), encode([(2, "a2", total)])], epoch)
        # A key that is missing is not answered here (the caller upqueries).
        assert s.hits("articleWithVotes", [row(id=0)], None, encode) is None
        assert s.hits("articleWithVotes", keys, epoch + 1, encode) is None, "an epoch to wait for"
    finally:
        s.stop()
