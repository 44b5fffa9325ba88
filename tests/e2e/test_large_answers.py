"""Answers larger than grpc's default 4 MiB message, through the real server with its hit
replica: a whole view of about 5 MB reaches a default `Client` whole, in columns and in rows,
on its first lookup (the server's locked path) and its next (a hit through the replica), and
as a subscription's snapshot; one past the server's `--max-message-bytes` is refused with
RESOURCE_EXHAUSTED naming the view, the size and the flag, on both paths and as a
subscription, and changes nothing; a client told a smaller limit than the answer fails in
the client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import AsyncClient, Client, ResourceExhausted
from pomoview.client.auth import MAX_MESSAGE_BYTES
from pomoview.server.limits.requests import Limits

from .server_process import ServerProcess

PROGRAM = """
source item(id: int, text: string).
source copy(c: int).
view everything().
everything(id: I, text: T) :- item(id: I, text: T).
view twice().
twice(id: I, text: T, c: C) :- item(id: I, text: T), copy(c: C).
view byId(id).
byId(id: I, text: T) :- item(id: I, text: T).
"""
ITEMS = 50_000
TEXT = 100  # characters per row: about 5.3 MB in columns and 6.5 MB in rows for ITEMS rows
LIMIT = "8M"


def text(i: int) -> str:
    return f"{i:08d}".ljust(TEXT, "x")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = Path(tmp_path_factory.mktemp("large-answers"))
    program = folder / "large.pomo"
    program.write_text(PROGRAM)
    srv = ServerProcess(
        folder / "data", program=program, extra_args=["--hit-replica", "--max-message-bytes", LIMIT]
    ).start()
    with srv.client() as db:
        for start in range(0, ITEMS, 10_000):
            db.write("item", insert=[{"id": i, "text": text(i)} for i in range(start, start + 10_000)])
        db.write("copy", insert=[{"c": 1}, {"c": 2}])
    yield srv
    srv.stop()


def model() -> list[tuple[int, str]]:
    return [(i, text(i)) for i in range(ITEMS)]


@pytest.mark.parametrize("columnar", [True, False], ids=["columns", "rows"])
def test_a_whole_view_past_four_mebibytes_reaches_a_default_client(
    server: ServerProcess, columnar: bool
) -> None:
    with server.client(columnar=columnar) as db:
        for _ in range(2):  # the first fills the reader; the second is a hit, via the replica
            rows = db.lookup("everything", {})
            assert sorted((r["id"], r["text"]) for r in rows) == model()
        # lookup_many's dict has the whole view's key, the empty tuple.
        (whole,) = db.lookup_many("everything", [{}]).items()
        assert whole[0] == () and sorted((r["id"], r["text"]) for r in whole[1]) == model()


def test_the_async_client_takes_it_too(server: ServerProcess) -> None:
    async def whole() -> list[tuple[int, str]]:
        async with AsyncClient(server.address, timeout=120.0) as db:
            return sorted((r["id"], r["text"]) for r in await db.lookup("everything", {}))

    assert asyncio.run(whole()) == model()


def test_an_answer_past_the_servers_limit_is_refused_naming_the_view_and_the_flag(
    server: ServerProcess,
) -> None:
    with server.client() as db:
        for _ in range(2):
            with pytest.raises(ResourceExhausted) as refused:
                db.lookup("twice", {})
            message = str(refused.value)
            assert "'twice'" in message and "--max-message-bytes" in message, message
            assert "more than the limit of 8,388,608" in message, message
        # Nothing changed: the same rows are there, by key and whole.
        assert db.lookup("byId", {"id": 7}) == [{"id": 7, "text": text(7)}]
        assert len(db.lookup("everything", {})) == ITEMS


def test_a_subscription_past_the_servers_limit_ends_naming_the_view_and_the_flag(
    server: ServerProcess,
) -> None:
    with server.client() as db:
        with db.subscribe("twice", [{}]) as sub, pytest.raises(ResourceExhausted) as refused:
            next(sub)
        message = str(refused.value)
        assert "a subscription's message of 'twice'" in message, message
        assert "--max-message-bytes" in message and "subscribe to fewer keys" in message, message
        with db.subscribe("everything", [{}]) as sub:  # one under the limit is sent whole
            snapshot = next(sub)
            assert snapshot.snapshot
            assert sorted((r["id"], r["text"]) for r in snapshot.inserts) == model()


def test_a_client_with_a_smaller_limit_refuses_the_answer_itself(server: ServerProcess) -> None:
    with Client(server.address, timeout=120.0, max_message_bytes=4 << 20) as db:
        with pytest.raises(ResourceExhausted, match="larger than max"):
            db.lookup("everything", {})
        assert db.lookup("byId", {"id": 3}) == [{"id": 3, "text": text(3)}]


def test_the_clients_default_limit_is_the_servers() -> None:
    assert MAX_MESSAGE_BYTES == Limits().max_message_bytes


@pytest.mark.parametrize("bad", [0, -1, 1.5, "64M"])
def test_a_bad_client_limit_is_refused_before_connecting(bad: object) -> None:
    with pytest.raises(ValueError, match="max_message_bytes must be a positive number of bytes"):
        Client("127.0.0.1:1", max_message_bytes=bad)  # type: ignore[arg-type]
