"""Evict (server/reads/evictions.py) end to end, on a real server of its own (evicting everything
would disturb the shared server's other readers' counts): evicted keys leave the readers and
Stats says so, the next lookups fetch them again with the plain-Python model's answers, writes
that meet an evicted key are not lost, a subscription's keys stay, bad requests are refused in
words, and `pomoview evict` does the same from the command line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import AsyncClient, Client, InvalidArgument, NotFound

from .server_process import VOTES, ServerProcess
from .votes_model import VotesModel

VIEW = "articleWithVotes"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = Path(tmp_path_factory.mktemp("evict")) / "data"
    process = ServerProcess(data, program=VOTES).start()
    yield process
    process.stop()


def present(db: Client) -> int:
    [reader] = [r for r in db.stats()["readers"] if r["view"] == VIEW]  # type: ignore[union-attr]
    return int(reader["present_keys"])


def reader_upqueries(db: Client) -> int:
    """Upqueries the view's reader sent above it (a lookup that found its key missing there)."""
    states = db.stats()["states"]
    [reader] = [s for s in states if s["operator"] == "Reader" and VIEW in s["views"]]  # type: ignore[union-attr]
    return int(reader["upqueries"])


def write(db: Client, model: VotesModel, source: str, rows: list[dict]) -> int:
    epoch = db.write(source, insert=rows)
    model.apply(source, rows, [])
    return epoch


def test_evicted_keys_are_fetched_again_with_the_same_answers(server: ServerProcess) -> None:
    model = VotesModel()
    ids = list(range(1, 7))
    with server.client() as db:
        write(db, model, "article", [{"id": i, "title": f"a{i}"} for i in ids])
        epoch = write(db, model, "vote", [{"article_id": i, "user_id": u} for i in ids for u in range(i)])
        got = db.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=epoch)
        assert {k: v for k, v in got.items()} == {(i,): model.view(i) for i in ids}
        db.evict()  # a clean start whatever ran before
        db.lookup_many(VIEW, [{"id": i} for i in ids])
        assert present(db) == 6

        done = db.evict(VIEW, [{"id": 1}, {"id": 2}, {"id": 99}])  # 99 was never present
        assert (done["keys_evicted"], done["pinned_keys"]) == (2, 0)
        assert present(db) == 4
        upqueries = reader_upqueries(db)
        assert db.lookup(VIEW, {"id": 1}) == model.view(1)
        assert reader_upqueries(db) == upqueries + 1  # asked above again: it was gone

        # A write that meets an evicted key is dropped there, and still answered.
        epoch = write(db, model, "vote", [{"article_id": a, "user_id": 100} for a in (2, 3)])
        assert db.lookup(VIEW, {"id": 2}, min_epoch=epoch) == model.view(2)
        assert db.lookup(VIEW, {"id": 3}, min_epoch=epoch) == model.view(3)

        done = db.evict(VIEW)  # every key of the view's reader
        assert done["keys_evicted"] == 6 and present(db) == 0
        db.lookup_many(VIEW, [{"id": i} for i in ids])
        before = db.stats()["memory"]["partial_state_bytes"]  # type: ignore[index]
        done = db.evict()  # everything, the states above the reader too
        stats = db.stats()
        assert done["keys_evicted"] >= 6 and present(db) == 0
        assert stats["memory"]["partial_state_bytes"] < before  # type: ignore[index]
        partial = [s for s in stats["states"] if s["stateful"] and s["partial"]]  # type: ignore[union-attr]
        assert partial and all(s["present_keys"] == 0 for s in partial), partial
        got = db.lookup_many(VIEW, [{"id": i} for i in ids])
        assert {k: v for k, v in got.items()} == {(i,): model.view(i) for i in ids}


def test_a_subscriptions_keys_stay(server: ServerProcess) -> None:
    model = VotesModel()
    with server.client() as db:
        write(db, model, "article", [{"id": 40, "title": "s"}, {"id": 41, "title": "t"}])
        db.lookup(VIEW, {"id": 41})
        with db.subscribe(VIEW, [{"id": 40}]) as sub:
            changes = iter(sub)
            assert next(changes).snapshot
            done = db.evict(VIEW, [{"id": 40}, {"id": 41}])
            assert (done["keys_evicted"], done["pinned_keys"]) == (1, 1)
            assert db.evict()["pinned_keys"] >= 1
            write(db, model, "vote", [{"article_id": 40, "user_id": 1}])
            change = next(changes)
            assert [r["votes"] for r in change.inserts] == [1]
        assert db.lookup(VIEW, {"id": 40}) == model.view(40)


def test_bad_evictions_are_refused_in_words(server: ServerProcess) -> None:
    with server.client() as db:
        with pytest.raises(NotFound, match="no view named 'nope'"):
            db.evict("nope")
        with pytest.raises(InvalidArgument, match="need the view"):
            db.evict(None, [{"id": 1}])
        with pytest.raises(InvalidArgument, match="nope"):
            db.evict(VIEW, [{"nope": 1}])


def test_the_command_line_evicts(server: ServerProcess) -> None:
    with server.client() as db:
        db.write("article", insert=[{"id": 70, "title": "c"}, {"id": 71, "title": "d"}])
        db.lookup_many(VIEW, [{"id": 70}, {"id": 71}])
    env = {**os.environ, "POMOVIEW_ADDRESS": server.address}

    def evict(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pomoview.server.cli", "evict", *argv],
            capture_output=True, text=True, timeout=60, env=env,
        )

    done = evict(VIEW, "--key", "id=70", "--key", '{"id": 71}')
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("evicted 2 keys (2 keys of articleWithVotes;"), done.stdout
    done = evict(VIEW, "--key", "id=70")  # gone already
    assert done.stdout.startswith("evicted 0 keys (1 key of articleWithVotes;"), done.stdout
    done = evict("--key", "id=70")
    assert done.returncode != 0 and "--key needs the VIEW" in done.stderr, done.stderr
    done = evict("nope")
    assert done.returncode != 0 and "no view named 'nope'" in done.stderr, done.stderr


def test_the_async_client_evicts(server: ServerProcess) -> None:
    with server.client() as db:
        db.write("article", insert=[{"id": 80, "title": "x"}])
        db.lookup(VIEW, {"id": 80})

    async def run() -> dict[str, int]:
        async with AsyncClient(server.address) as db:
            return await db.evict(VIEW, [{"id": 80}])

    assert asyncio.run(run())["keys_evicted"] == 1
