"""Spark jobs that hang, end to end: the real server with short deadlines, its jobs stalled
from inside Spark (POMOVIEW_TEST_STALL_SPARK). Coalesced lookups of a stalled upquery all get
DEADLINE_EXCEEDED naming the flag, and the next lookup answers; a stalled flush is retried
until it succeeds, lookups answering meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import Client, DeadlineExceeded

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel

VIEW = "articleWithVotes"
TIMEOUT = 5  # seconds; an unstalled job takes well under one once Spark is warm


@pytest.fixture(scope="module")
def stalled_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = Path(tmp_path_factory.mktemp("timeout"))
    stall = root / "stall"
    stall.mkdir()
    server = ServerProcess(
        root / "data",
        program=VOTES,
        flush_interval=0.5,
        extra_args=["--spark-timeout", str(TIMEOUT), "--spark-write-timeout", str(TIMEOUT)],
        env={"POMOVIEW_TEST_STALL_SPARK": str(stall)},
    ).start()
    yield server, stall
    server.stop()


def lookup_warm(db: Client, article: int, min_epoch: int | None = None) -> object:
    """A lookup that may meet the deadline while the JVM compiles its first jobs."""
    for _ in range(5):
        try:
            return db.lookup(VIEW, {"id": article}, min_epoch=min_epoch)
        except DeadlineExceeded:
            continue
    raise AssertionError("Spark never answered within the deadline")


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_stalled_jobs_time_out_and_the_server_recovers(stalled_server: tuple[ServerProcess, Path]) -> None:
    server, stall = stalled_server
    model = VotesModel()
    with server.client() as db:
        articles = [{"id": i, "title": f"article {i}"} for i in range(10)]
        votes = [{"article_id": i, "user_id": u} for i in range(10) for u in range(i % 4)]
        db.write("article", insert=articles)
        epoch = db.write("vote", insert=votes)
        model.apply("article", articles, [])
        model.apply("vote", votes, [])
        wait_for_flush(db, epoch)  # the flusher retries a first flush slower than the deadline
        assert lookup_warm(db, 0, epoch) == model.view(0)

        (stall / "fetch").write_text("600")
        jobs = db.stats()["spark_jobs"]
        failures: list[BaseException] = []

        def look() -> None:
            with server.client() as reader:
                try:
                    reader.lookup(VIEW, {"id": 3})
                except BaseException as err:
                    failures.append(err)

        started = time.monotonic()
        lookups = [threading.Thread(target=look) for _ in range(4)]
        for t in lookups:
            t.start()
        for t in lookups:
            t.join(300)
        assert time.monotonic() - started < 120  # the stalled tasks would sleep 600 s
        assert len(failures) == 4 and all(isinstance(f, DeadlineExceeded) for f in failures), failures
        message = str(failures[0])
        assert f"Spark timeout of {TIMEOUT} s (--spark-timeout, env POMOVIEW_SPARK_TIMEOUT)" in message
        assert db.stats()["spark_jobs"] - jobs <= 4  # type: ignore[operator]  (coalesced: 2 per round)
        (stall / "fetch").unlink()
        assert lookup_warm(db, 3) == model.view(3)

        (stall / "flush").write_text("600")
        vote = {"article_id": 3, "user_id": 99}
        later = db.write("vote", insert=[vote])
        model.apply("vote", [vote], [])
        log = server.log_path
        end = time.monotonic() + 120
        while log.read_text().count("a flush failed") < 2:
            assert time.monotonic() < end, "no flush failed"
            time.sleep(0.2)
        assert "--spark-write-timeout" in log.read_text()
        assert db.stats()["flushed_epoch"] < later  # type: ignore[operator]
        assert db.lookup(VIEW, {"id": 3}, min_epoch=later) == model.view(3)  # warm: no Spark
        (stall / "flush").unlink()
        wait_for_flush(db, later)
        assert lookup_warm(db, 5) == model.view(5)
