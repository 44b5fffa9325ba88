"""Each key's answer is encoded once per version of its rows and per form, and hits serve
the cached encoding: the ViewService in process (its encoders counted) behind a real gRPC
server, read through `Client` in columns and in rows (server/api/answers.py,
dataflow/operators/reader.py `Reader.encoded_all`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from pomoview.client import Client
from pomoview.planner.compile import CompiledProgram
from pomoview.server.api.answers import ColumnEncoder
from pomoview.server.api.service import Answer, ViewService, add_view_service
from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VIEW, VOTES


class Counted:
    """An answer form whose `encode` counts the keys it encodes, by form and by key id."""

    def __init__(self, answer: Answer, counts: Counter[tuple[str, object]]) -> None:
        self.form, self.response, self._answer, self._counts = answer.form, answer.response, answer, counts

    def encode(self, rows: list[tuple[object, ...]]) -> Any:
        self._counts[(self.form, rows[0][0] if rows else None)] += 1
        return self._answer.encode(rows)


class CountingService(ViewService):
    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler)
        self.encodes: Counter[tuple[str, object]] = Counter()
        self.made: dict[tuple[int, str, bool], Counted] = {}

    def answer(self, program: CompiledProgram, view: str, columnar: bool) -> Any:
        key = (id(program), view, columnar)
        if key not in self.made:
            self.made[key] = Counted(super().answer(program, view, columnar), self.encodes)
        return self.made[key]


@pytest.fixture
def served(tmp_path: Path, spark: Any) -> Iterator[tuple[CountingService, str]]:
    scheduler = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    scheduler.start()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    service = CountingService(scheduler)
    add_view_service(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        scheduler.install(VOTES)
        yield service, f"127.0.0.1:{port}"
    finally:
        server.stop(None)
        scheduler.stop()


def by_form(counts: Counter[tuple[str, object]], form: str) -> dict[object, int]:
    return {k: n for (f, k), n in counts.items() if f == form and n}


def test_hits_serve_each_keys_cached_columns(served: tuple[CountingService, str]) -> None:
    service, address = served
    keys = [{"id": i} for i in (1, 2, 3)]
    with Client(address) as db, Client(address, columnar=False) as rows_db:
        db.write("article", insert=[{"id": i, "title": f"a{i}"} for i in (1, 2, 3)])
        epoch = db.write("vote", insert=[{"article_id": 2, "user_id": 7}])
        first = db.lookup_many(VIEW, keys, min_epoch=epoch)  # the miss: each key encoded once
        assert by_form(service.encodes, "columns") == {1: 1, 2: 1, 3: 1}
        for _ in range(5):  # hits, 1 key and 3 keys per call: nothing encoded again
            assert db.lookup_many(VIEW, keys) == first
            assert db.lookup(VIEW, {"id": 2}) == first[(2,)] == [{"id": 2, "title": "a2", "votes": 1}]
        assert by_form(service.encodes, "columns") == {1: 1, 2: 1, 3: 1}
        assert by_form(service.encodes, "rows") == {}
        # The row form has a cache of its own, beside the columns'.
        assert rows_db.lookup_many(VIEW, keys) == first
        rows_db.lookup_many(VIEW, keys)
        assert by_form(service.encodes, "rows") == {1: 1, 2: 1, 3: 1}
        # A write re-encodes the key it changed, and only that key, at its next read.
        epoch = db.write("vote", insert=[{"article_id": 3, "user_id": 7}])
        after = db.lookup_many(VIEW, keys, min_epoch=epoch)
        assert after[(3,)] == [{"id": 3, "title": "a3", "votes": 1}] and after[(1,)] == first[(1,)]
        db.lookup_many(VIEW, keys)
        assert by_form(service.encodes, "columns") == {1: 1, 2: 1, 3: 2}


def test_a_one_key_answer_is_the_cached_bytes(served: tuple[CountingService, str]) -> None:
    """A one-key hit's response is the key's cached body behind the epoch: nothing joined."""
    service, address = served
    with Client(address) as db:
        epoch = db.write("article", insert=[{"id": 5, "title": "e"}])
        assert db.lookup(VIEW, {"id": 5}, min_epoch=epoch) == [{"id": 5, "title": "e", "votes": 0}]
    program = service.scheduler.program
    assert program is not None
    answer: Callable[..., Any] = service.answer(program, VIEW, True).encode
    fragments = answer([(5, "e", 0)])
    response = ColumnEncoder([("id", "int"), ("title", "string"), ("votes", "int")]).response([fragments], 9)
    assert response == b"\x10\x09" + fragments[-1]


ORDERED = """
source story(author: int, id: int, created: int).
view newest(author) order by created desc, id limit 3.
newest(author: A, id: I, created: C) :- story(author: A, id: I, created: C).
"""


def test_a_page_of_present_keys_is_a_hit(served: tuple[CountingService, str]) -> None:
    """Pages are cut from the rows a hit reads without the dataflow lock (answered at the
    last published epoch): one is answered while another thread holds the lock."""
    service, address = served
    service.scheduler.install(ORDERED)
    with Client(address, timeout=30.0) as db:
        epoch = db.write("story", insert=[{"author": 1, "id": i, "created": i % 4} for i in range(6)])
        first = db.lookup("newest", {"author": 1}, limit=2, min_epoch=epoch)  # a miss: fills the key
        assert [r["id"] for r in first] == [3, 2]
        with service.scheduler.view_state.lock:  # the locked path would wait for this
            second = db.lookup("newest", {"author": 1}, limit=2, after=first[-1])
            assert [r["id"] for r in second] == [1]  # the window: 3, 2, 1
            assert db.lookup("newest", {"author": 1}, limit=2) == first
