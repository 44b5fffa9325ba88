"""The scheduler in-process, over real Spark (the shared session) and real files."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    ResourceExhausted,
)
from pomoview.server.scheduler.scheduler import Scheduler

from .conftest import fill

PROGRAM_A = """
source a(x: int, y: string).
source b(x: int).
view v(x).
v(x: X, n: N) :- b(x: X), N := count : a(x: X).
"""
PROGRAM_B = """
source b(x: int).
view w(x).
w(x: X) :- b(x: X), X > 1.
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string", float: "float", bool: "bool"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def make(tmp_path: Path, spark: Any) -> Scheduler:
    scheduler = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    scheduler.start()
    return scheduler


def test_restart_after_a_program_dropped_a_source(tmp_path: Path, spark: Any) -> None:
    s = make(tmp_path, spark)
    s.install(PROGRAM_A)
    s.write([("a", [row(x=1, y="p"), row(x=1, y="q")], []), ("b", [row(x=1), row(x=2)], [])])
    epoch = s.write([("a", [], [row(x=1, y="p")])])
    assert s.lookup("v", [row(x=1)], min_epoch=epoch)[0] == [[{"x": 1, "n": 1}]]
    s.install(PROGRAM_B)  # `a` is no longer declared, but its writes are in the log
    s.stop()
    s = make(tmp_path, spark)
    try:
        assert s.durable_epoch == epoch
        assert s.lookup("w", [row(x=2)])[0] == [[{"x": 2}]]
        with pytest.raises(NotFound):
            s.lookup("v", [row(x=1)])
    finally:
        s.stop()


def test_flush_then_overlay_gives_the_applied_state(tmp_path: Path, spark: Any) -> None:
    s = make(tmp_path, spark)
    try:
        s.install(PROGRAM_A)
        s.write([("b", [row(x=5)], [])])
        s.write([("a", [row(x=5, y=str(i)) for i in range(4)], [])])
        flushed_through = s.write([("a", [], [row(x=5, y="0")])])
        s.lookup("v", [row(x=6)], min_epoch=flushed_through)  # waits until applied
        assert s.flush() == flushed_through
        epoch = s.write([("a", [row(x=5, y="9")], [row(x=5, y="1")])])  # only in the log tail
        assert s.lookup("v", [row(x=5)], min_epoch=epoch)[0] == [[{"x": 5, "n": 3}]]
    finally:
        s.stop()


def test_refusals_change_nothing(tmp_path: Path, spark: Any) -> None:
    s = make(tmp_path, spark)
    try:
        with pytest.raises(FailedPrecondition):
            s.write([("b", [row(x=1)], [])])
        s.install(PROGRAM_A)
        epoch = s.write([("b", [row(x=1)], [])])
        with pytest.raises(InvalidArgument):
            s.write([("b", [row(x=2)], []), ("a", [row(x="no", y="p")], [])])
        with pytest.raises(FailedPrecondition):
            s.install("source b(x: string).\n")  # b holds ints
        with pytest.raises(OutOfRange):
            s.lookup("v", [row(x=1)], min_epoch=epoch + 5)
        assert s.durable_epoch == epoch
        assert s.lookup("v", [row(x=1)], min_epoch=epoch)[0] == [[{"x": 1, "n": 0}]]
        assert s.lookup("v", [row(x=2)])[0] == [[]]
    finally:
        s.stop()


def test_time_features_are_served_but_not_bulk_loaded(tmp_path: Path, spark: Any) -> None:
    """`@next` rules and transient sources install (tests/server/test_time_scheduler.py runs
    them); a bulk load, which would step past their state, is refused and changes nothing."""
    s = make(tmp_path, spark)
    try:
        program = (
            "transient source clicks(id: int).\n"
            "source start(id: int).\n"
            "view box(id).\n"
            "box(id: I, on: false) :- start(id: I).\n"
            "box(id: I, on: S)@next :- box(id: I, on: S), !clicks(id: I).\n"
        )
        s.install(program, "box.pomo")
        epoch = s.write([("start", [row(id=2)], [])])
        csv = tmp_path / "start.csv"
        csv.write_text("id\n3\n")
        with pytest.raises(FailedPrecondition) as refused:
            s.load("start", str(csv))
        assert "'start' cannot be bulk loaded: the installed program has @next rules" in str(refused.value)
        assert s.durable_epoch == epoch
        assert s.lookup("box", [row(id=2), row(id=3)], min_epoch=epoch)[0] == [[{"id": 2, "on": False}], []]
    finally:
        s.stop()


VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: Id, title: T, votes: N) :- article(id: Id, title: T), N := count : vote(article_id: Id).
"""


def test_writes_during_upqueries_are_neither_lost_nor_counted_twice(tmp_path: Path, spark: Any) -> None:
    """Cold lookups run their Spark jobs while a writer keeps committing to the same keys.

    A write applied between a job's snapshot and the round that fills from it must be
    added by the overlay exactly once; a write applied after the fill arrives as a delta.
    """
    import random
    import threading

    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=0.3)
    s.start()
    try:
        s.install(VOTES)
        articles = 12
        s.write([("article", [row(id=i, title=f"t{i}") for i in range(articles)], [])])
        votes: set[tuple[int, int]] = set()
        lock = threading.Lock()
        done = threading.Event()
        errors: list[BaseException] = []

        looked_up = 0

        def writer() -> None:
            rng = random.Random(3)
            try:
                # At least 150 writes, and on until three lookups have run meanwhile (a slow
                # first Spark job must not leave the lookups without writes to race).
                for n in range(5000):
                    if n >= 150 and looked_up >= 3:
                        break
                    a = rng.randrange(articles)
                    dels = []
                    with lock:
                        if votes and rng.random() < 0.3:
                            dels = [rng.choice(sorted(votes))]
                    ins = [(a, 1000 + n)]
                    s.write(
                        [
                            (
                                "vote",
                                [row(article_id=x, user_id=u) for x, u in ins],
                                [row(article_id=x, user_id=u) for x, u in dels],
                            )
                        ]
                    )
                    with lock:
                        votes.difference_update(dels)
                        votes.update(ins)
            except BaseException as err:  # reported by the main thread
                errors.append(err)
            finally:
                done.set()

        thread = threading.Thread(target=writer)
        thread.start()
        while not done.is_set() and looked_up < articles:
            s.lookup("articleWithVotes", [row(id=looked_up)])  # a cold key: Spark job, lock released
            looked_up += 1
        thread.join()
        assert not errors, errors
        final = s.durable_epoch
        for i in range(articles):
            got = s.lookup("articleWithVotes", [row(id=i)], min_epoch=final)[0][0]
            expected = sum(1 for a, _ in votes if a == i)
            assert got == [{"id": i, "title": f"t{i}", "votes": expected}], f"article {i}"
        assert looked_up >= 3, "the test must look keys up while the writer runs"
    finally:
        s.stop()


def test_a_full_disk_refuses_writes_and_applies_none_of_them(
    tmp_path: Path, spark: Any, tiny_fs: Callable[[Path], Path]
) -> None:
    """The log lives on a 64 KiB tmpfs. While it is full, concurrent writes are refused with
    RESOURCE_EXHAUSTED and change nothing, now or after a restart; once space is free, writes
    commit again."""
    fs = tiny_fs(tmp_path / "data" / "wal")
    s = make(tmp_path, spark)
    try:
        s.install(PROGRAM_A)
        first = s.write([("b", [row(x=1), row(x=2)], [])])
        assert s.lookup("v", [row(x=1)], min_epoch=first)[0] == [[{"x": 1, "n": 0}]]  # builds the reader
        filler = fill(fs)
        refused: list[ResourceExhausted] = []
        others: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                # Over a page each: a full tmpfs may still hold the rest of the segment's last page.
                rows = [row(x=1, y=f"{w}-{i}-" + "p" * 60) for i in range(100)]
                s.write([("a", rows, []), ("b", [row(x=3)], [])])
            except ResourceExhausted as err:
                refused.append(err)
            except BaseException as err:
                others.append(err)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not others, others
        assert len(refused) == 4
        assert "No space left on device" in refused[0].message
        assert "not committed" in refused[0].message
        stats = s.stats()
        assert (stats.durable_epoch, stats.applied_epoch) == (first, first)
        assert s.lookup("v", [row(x=1), row(x=3)])[0] == [[{"x": 1, "n": 0}], []]

        filler.unlink()
        second = s.write([("a", [row(x=1, y="kept")], [])])
        assert second > first
        expected = [[{"x": 1, "n": 1}], []]
        assert s.lookup("v", [row(x=1), row(x=3)], min_epoch=second)[0] == expected
    finally:
        s.stop()
    s = make(tmp_path, spark)
    try:
        assert s.durable_epoch == second
        assert s.lookup("v", [row(x=1), row(x=3)])[0] == expected
    finally:
        s.stop()


def test_concurrent_writers_are_applied_in_epoch_order(tmp_path: Path, spark: Any) -> None:
    """Writers that share fsyncs each get their own epoch, and each batch is applied once."""
    s = make(tmp_path, spark)
    try:
        s.install(PROGRAM_A)
        s.write([("b", [row(x=w) for w in range(6)], [])])
        s.lookup("v", [row(x=0)])  # a reader exists, so every batch goes through its circuit
        epochs: list[int] = []
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                for i in range(25):
                    epochs.append(s.write([("a", [row(x=w, y=str(i))], [])]))
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(set(epochs)) == len(epochs) == 150
        assert s.durable_epoch == max(epochs)
        got = s.lookup("v", [row(x=w) for w in range(6)], min_epoch=max(epochs), timeout=30)[0]
        assert got == [[{"x": w, "n": 25}] for w in range(6)]
        assert s.stats().applied_epoch == max(epochs)
    finally:
        s.stop()


PROGRAM_KIND = """
source a(x: int, y: int, kind: string).
view v(x).
v(x: X, y: Y) :- a(x: X, y: Y, kind: "up").
"""


def test_a_constant_in_an_atom_filters_the_store_fetch_and_the_overlay(
    tmp_path: Path, spark: Any
) -> None:
    s = make(tmp_path, spark)
    try:
        s.install(PROGRAM_KIND)
        fetch = s.store.fetch
        calls: list[tuple[str, tuple[str, ...], Any]] = []

        def recording_fetch(source: str, columns: Any, keys: Any, filters: Any = None, **kw: Any) -> Any:
            calls.append((source, tuple(columns), filters))
            return fetch(source, columns, keys, filters, **kw)

        s.store.fetch = recording_fetch  # type: ignore[method-assign]
        present: set[tuple[int, int, str]] = set()

        def write(inserts: list[tuple[int, int, str]], deletes: list[tuple[int, int, str]]) -> int:
            present.difference_update(deletes)
            present.update(inserts)
            return s.write(
                [
                    (
                        "a",
                        [row(x=x, y=y, kind=k) for x, y, k in inserts],
                        [row(x=x, y=y, kind=k) for x, y, k in deletes],
                    )
                ]
            )

        def expected(x: int) -> list[dict[str, int]]:
            return sorted(({"x": x, "y": y} for px, y, k in present if px == x and k == "up"), key=str)

        def check(keys: list[int], epoch: int) -> None:
            answers = s.lookup("v", [row(x=x) for x in keys], min_epoch=epoch)[0]
            for x, answer in zip(keys, answers, strict=True):
                assert sorted(answer, key=str) == expected(x), x

        kinds = ("up", "down", "side")
        write([(x, y, kinds[(x + y) % 3]) for x in range(6) for y in range(4)], [])
        epoch = write([], [(1, 2, "up"), (2, 0, "down")])
        check([0, 1], epoch)  # filled before the flush
        s.lookup("v", [row(x=0)], min_epoch=epoch)
        assert s.flush() == epoch
        # only in the log tail: the overlay must apply the filter to these too
        epoch = write(
            [(2, 7, "up"), (2, 8, "down"), (3, 9, "side"), (6, 1, "up"), (6, 2, "down")],
            [(2, 1, "up"), (3, 0, "up"), (4, 0, "down")],
        )
        check([0, 1, 2, 3, 4, 5, 6, 7], epoch)
        assert calls, "the lookups ran no store fetch"
        assert all(source == "a" and filters == {"kind": "up"} for source, _, filters in calls), calls
        epoch = write([(0, 5, "up"), (5, 5, "down")], [(0, 0, "up"), (0, 2, "side")])
        check([0, 2, 5, 6], epoch)
    finally:
        s.stop()
