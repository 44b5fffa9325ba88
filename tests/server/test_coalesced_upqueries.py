"""Coalesced upqueries over real Spark: concurrent misses on one source share Spark jobs.

The first job of each source is held (a gate around the real `SourceStore.fetch`) until every
other lookup has missed, so the figures do not depend on the machine's timing; the answers
are checked against Python, and the jobs counted by the scheduler's own counter.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
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


def _loaded(tmp_path: Path, spark: Any, linger: float = 0.0) -> tuple[Scheduler, Counter[int]]:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.upquery_jobs.linger = linger  # no gathering window unless the test is about it
    s.start()
    s.install(VOTES)
    votes: Counter[int] = Counter()
    s.write([("article", [row(id=i, title=f"a{i}") for i in range(40)], [])])
    batch = []
    for u in range(400):
        article = (u * 7) % 37  # articles 37..39 get no votes
        votes[article] += 1
        batch.append(row(article_id=article, user_id=u))
    last = s.write([("vote", batch, [])])
    # Applied before the flush, which moves only applied batches: the lookups then read the
    # rows from Parquet through their jobs, at an epoch that holds them. (Without the wait,
    # under a load average of 17 one run in four answered [] for an article, as a lookup
    # answering before the dataflow applied the article's epoch would.)
    s.view_state.wait_applied(last, time.monotonic() + 60)
    s.flush()
    return s, votes


def _gated(s: Scheduler) -> tuple[list[tuple[str, int]], threading.Event]:
    """Holds every job (of both kinds of keyed read: tuples, and Arrow columns) until the
    returned event is set; records (source, number of keys) per job."""
    jobs: list[tuple[str, int]] = []
    release = threading.Event()

    def gate(fetch: Any) -> Any:
        def gated(source: str, columns: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
            jobs.append((source, len(keys)))
            assert release.wait(60)
            return fetch(source, columns, keys, *args, **kwargs)

        return gated

    s.store.fetch = gate(s.store.fetch)  # type: ignore[method-assign]
    s.store.fetch_columns = gate(s.store.fetch_columns)  # type: ignore[method-assign]
    return jobs, release


def _lookups(s: Scheduler, keys: list[int]) -> tuple[list[threading.Thread], dict[int, Any]]:
    answers: dict[int, Any] = {}

    def one(i: int, key: int) -> None:
        rows, _ = s.lookup("articleWithVotes", [row(id=key)])
        answers[i] = rows[0]

    threads = [threading.Thread(target=one, args=(i, k)) for i, k in enumerate(keys)]
    for t in threads:
        t.start()
    return threads, answers


def _wait_until(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _queued_keys(s: Scheduler) -> int:
    with s.upquery_jobs._lock:
        return sum(
            len(state.queued.keys) if state.queued is not None else 0
            for state in s.upquery_jobs._channels.values()
        )


def test_twenty_concurrent_misses_on_distinct_keys_take_two_jobs_per_source(
    tmp_path: Path, spark: Any
) -> None:
    s, votes = _loaded(tmp_path, spark)
    try:
        before = s.counters.spark_jobs
        jobs, release = _gated(s)
        keys = list(range(20, 40))
        threads, answers = _lookups(s, keys)
        # The first lookup's two jobs (article and vote) are held; the other 19 keys of each
        # source queue behind them as one job each.
        _wait_until(lambda: _queued_keys(s) == 2 * 19)
        release.set()
        for t in threads:
            t.join(60)
        assert sorted(jobs) == [("article", 1), ("article", 19), ("vote", 1), ("vote", 19)]
        assert s.counters.spark_jobs - before == 4
        for i, key in enumerate(keys):
            assert answers[i] == [{"id": key, "title": f"a{key}", "votes": votes[key]}]
    finally:
        s.stop()


def test_concurrent_misses_of_one_key_share_one_job_per_source(tmp_path: Path, spark: Any) -> None:
    s, votes = _loaded(tmp_path, spark)
    try:
        before = s.counters.spark_jobs
        jobs, release = _gated(s)
        threads, answers = _lookups(s, [5] * 10)
        _wait_until(lambda: len(jobs) == 2)
        # Every lookup has missed and joined the running jobs before they are let go.
        _wait_until(lambda: all(
            state.running is not None and state.running.refs == 1 + 10
            for state in list(s.upquery_jobs._channels.values())
        ) and len(s.upquery_jobs._channels) == 2)
        release.set()
        for t in threads:
            t.join(60)
        assert sorted(jobs) == [("article", 1), ("vote", 1)]
        assert s.counters.spark_jobs - before == 2
        assert all(a == [{"id": 5, "title": "a5", "votes": votes[5]}] for a in answers.values())
        assert len(answers) == 10
        # Every lookup released the jobs' pins: nothing holds the log tail any more.
        _wait_until(lambda: not s.upquery_pins.versions)
    finally:
        s.stop()


def test_a_failed_job_fails_every_lookup_waiting_on_it_and_the_next_lookup_works(
    tmp_path: Path, spark: Any
) -> None:
    s, votes = _loaded(tmp_path, spark)
    try:
        fetch, fetch_columns = s.store.fetch, s.store.fetch_columns
        release = threading.Event()
        calls: list[str] = []

        def failing(source: str, *args: Any, **kwargs: Any) -> Any:
            calls.append(source)
            assert release.wait(60)
            if source == "vote":
                raise RuntimeError("the disk went away")
            return fetch(source, *args, **kwargs)

        s.store.fetch = failing  # type: ignore[method-assign]
        s.store.fetch_columns = failing  # type: ignore[method-assign]
        errors: list[str] = []

        def one() -> None:
            try:
                s.lookup("articleWithVotes", [row(id=3)])
            except Exception as err:
                errors.append(f"{type(err).__name__}: {err}")

        threads = [threading.Thread(target=one) for _ in range(5)]
        for t in threads:
            t.start()
        _wait_until(lambda: len(calls) == 2 and sum(
            state.running.refs for state in list(s.upquery_jobs._channels.values())
            if state.running is not None
        ) == 2 * (1 + 5))
        release.set()
        for t in threads:
            t.join(60)
        assert len(errors) == 5 and all("the disk went away" in e for e in errors), errors
        assert all(e.startswith("Unavailable") for e in errors)
        s.store.fetch, s.store.fetch_columns = fetch, fetch_columns  # type: ignore[method-assign]
        rows, _ = s.lookup("articleWithVotes", [row(id=3)])
        assert rows == [[{"id": 3, "title": "a3", "votes": votes[3]}]]
        _wait_until(lambda: not s.upquery_pins.versions)
    finally:
        s.stop()


def test_misses_that_arrive_within_the_linger_share_the_first_job(tmp_path: Path, spark: Any) -> None:
    s, votes = _loaded(tmp_path, spark, linger=2.0)
    try:
        before = s.counters.spark_jobs
        jobs: list[tuple[str, int]] = []

        def count(fetch: Any) -> Any:
            def counted(source: str, columns: Any, keys: Any, *args: Any, **kwargs: Any) -> Any:
                jobs.append((source, len(keys)))
                return fetch(source, columns, keys, *args, **kwargs)

            return counted

        s.store.fetch = count(s.store.fetch)  # type: ignore[method-assign]
        s.store.fetch_columns = count(s.store.fetch_columns)  # type: ignore[method-assign]
        keys = list(range(10, 30))
        threads, answers = _lookups(s, keys)
        for t in threads:
            t.join(60)
        assert sorted(jobs) == [("article", 20), ("vote", 20)]
        assert s.counters.spark_jobs - before == 2
        for i, key in enumerate(keys):
            assert answers[i] == [{"id": key, "title": f"a{key}", "votes": votes[key]}]
    finally:
        s.stop()
