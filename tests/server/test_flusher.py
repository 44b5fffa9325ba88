"""The scheduler's flusher: log truncation behind running upqueries, and compaction."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from pomoview.server.scheduler.scheduler import Scheduler

PROGRAM = """
source a(x: int, y: string).
source b(x: int).
view v(x).
v(x: X, n: N) :- b(x: X), N := count : a(x: X).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def test_the_log_tail_outlives_a_running_upquery(tmp_path: Path, spark: Any) -> None:
    """A flush while an upquery's Spark job runs keeps, in the tail, the writes after the
    job's snapshot: the answer is advanced with them, not fetched again."""
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        s.install(PROGRAM)
        s.write([("b", [row(x=x) for x in (5, 7)], [])])
        first = s.write([("a", [row(x=x, y=y) for x in (5, 7) for y in "pq"], [])])
        s.lookup("v", [row(x=0)], min_epoch=first)
        assert s.flush() == first
        jobs = s.counters.spark_jobs
        assert s.lookup("v", [row(x=7)])[0] == [[{"x": 7, "n": 2}]]
        per_lookup = s.counters.spark_jobs - jobs  # the cold lookup of one key, undisturbed

        started, release = threading.Event(), threading.Event()
        fetch = s.store.fetch
        calls: list[int] = []

        def held_fetch(*args: Any, **kwargs: Any) -> Any:
            calls.append(kwargs["at"].version)
            if len(calls) == 1:
                started.set()
                assert release.wait(60)
            return fetch(*args, **kwargs)

        s.store.fetch = held_fetch  # type: ignore[method-assign]
        answer: list[Any] = []
        lookup = threading.Thread(target=lambda: answer.append(s.lookup("v", [row(x=5)])))
        lookup.start()
        try:
            assert started.wait(60)
            second = s.write([("a", [row(x=5, y="r")], [])])
            third = s.write([("b", [row(x=6)], []), ("a", [], [row(x=5, y="p")])])
            s.lookup("v", [row(x=0)], min_epoch=third)  # warm: no Spark job
            assert s.flush() == third  # the store holds every write now...
            assert s.store.version == third
            # ...but the tail still holds what came after the running job's snapshot
            # (the round's jobs for a and b run side by side, both at that snapshot)
            assert calls and set(calls) == {first}
            assert s.tail.base == first
            assert [b.epoch for b in s.tail.batches] == [second, third]
        finally:
            release.set()
            lookup.join(60)
        assert answer and answer[0][0] == [[{"x": 5, "n": 2}]]  # p and q, + r, - p
        assert s.counters.spark_jobs - jobs == 2 * per_lookup, "no job ran again"
        assert s.flush() == third
        assert s.tail.base == third and s.tail.batches == []  # released
    finally:
        s.stop()


def test_the_flusher_compacts_and_a_restart_reads_the_compacted_store(tmp_path: Path, spark: Any) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.compact_min_parts = 3
    s.start()
    try:
        s.install(PROGRAM)
        s.write([("b", [row(x=x) for x in range(4)], [])])
        expected = {x: 0 for x in range(4)}
        for i in range(4):
            epoch = s.write([("a", [row(x=x, y=f"{i}") for x in range(4)], [row(x=i, y=f"{i - 1}")])])
            for x in range(4):
                expected[x] += 1 - (x == i and i > 0)
            s.lookup("v", [row(x=0)], min_epoch=epoch)
            s.flush()
        assert s.compact() == ["a"]  # `b` has one part
        assert s.compact() == []
        last = s.write([("a", [], [row(x=3, y="0")])])  # in the log only
        expected[3] -= 1
        got = s.lookup("v", [row(x=x) for x in range(4)], min_epoch=last)[0]
        assert got == [[{"x": x, "n": expected[x]}] for x in range(4)]
    finally:
        s.stop()
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        assert s.durable_epoch == last
        got = s.lookup("v", [row(x=x) for x in range(4)], min_epoch=last)[0]
        assert got == [[{"x": x, "n": expected[x]}] for x in range(4)]
    finally:
        s.stop()


def test_an_install_does_not_wait_for_a_flush_waiting_for_the_jvm(tmp_path: Path, spark: Any) -> None:
    """The flusher waits for the Spark session outside the flush lock, which an install takes:
    an install during a JVM boot (up to a minute on a busy machine) is not held up by it."""
    booting, booted = threading.Event(), threading.Event()

    def provider() -> Any:
        booting.set()
        assert booted.wait(60)
        return spark

    s = Scheduler(tmp_path / "data", provider, flush_interval=0.01)
    s.start()
    try:
        s.install(PROGRAM)
        epoch = s.write([("b", [row(x=1)], [])])
        assert booting.wait(60)  # the flusher has a batch and waits for the session
        installed = threading.Thread(target=s.install, args=(PROGRAM,))
        installed.start()
        installed.join(10)
        assert not installed.is_alive(), "the install waited for the JVM"
        booted.set()
        deadline = time.monotonic() + 60
        while s.store.version < epoch:
            assert time.monotonic() < deadline, "the flush did not go through once Spark was up"
            time.sleep(0.01)
    finally:
        booted.set()
        s.stop()
