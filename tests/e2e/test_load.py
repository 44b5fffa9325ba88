"""`pomoview load` end to end: the real server process loads CSV, Parquet and JSON-lines files
into examples/votes.pomo's sources as one epoch each; a bad row is refused with its row and
reason and changes nothing; a load survives SIGKILL; the CLI shows a progress bar and the count.

One server serves the whole module (the last test kills and restarts it); the model holds
every acknowledged write and load, in order.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pomoview.client import AsyncClient, Client, InvalidArgument, NotFound

from .server_process import VOTES, ServerProcess
from .votes_model import VotesModel

ARTICLES = 40


@dataclass
class Env:
    folder: Path
    server: ServerProcess
    model: VotesModel

    def check_views(self, db: Client, epoch: int) -> None:
        got = db.lookup_many("articleWithVotes", [{"id": i} for i in range(ARTICLES + 2)], min_epoch=epoch)
        for i in range(ARTICLES + 2):
            assert sorted(got[(i,)], key=str) == self.model.view(i), f"article {i}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    folder = Path(tmp_path_factory.mktemp("load"))
    env = Env(folder, ServerProcess(folder / "data", program=VOTES).start(), VotesModel())
    yield env
    assert env.server.process is not None
    if env.server.process.poll() is None:
        env.server.stop()


def votes(rng: random.Random, n: int, users: int = 500) -> list[dict[str, Any]]:
    return [{"article_id": rng.randrange(ARTICLES), "user_id": rng.randrange(users)} for _ in range(n)]


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> Path:
    lines = [",".join(columns)] + [",".join(_csv_field(r[c]) for c in columns) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _csv_field(value: Any) -> str:
    text = str(value)
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text


def test_loads_csv_jsonl_and_parquet(env: Env, spark: Any) -> None:
    rng = random.Random(11)
    with env.server.client() as db:
        # Some writes first: they are in the log (maybe not yet in Parquet) when the load runs.
        first = [{"id": i, "title": f"w{i}"} for i in range(0, ARTICLES, 4)]
        epoch = db.write("article", insert=first)
        env.model.apply("article", first, [])
        early = votes(rng, 50)
        epoch = db.write("vote", insert=early)
        env.model.apply("vote", early, [])
        env.check_views(db, epoch)  # readers with state, which the loads must not leave stale

        articles = [{"id": i, "title": f't{i}, "quoted"' if i % 5 == 0 else f"t{i}"} for i in range(ARTICLES)]
        path = write_csv(env.folder / "articles.csv", articles, ["title", "id"])
        assert db.load("article", path) == (ARTICLES, epoch + 1)
        epoch += 1
        env.model.apply("article", articles, [])
        env.check_views(db, epoch)

        loaded = votes(rng, 3000) + early[:10]  # duplicates in the file and of earlier writes
        path = env.folder / "votes.jsonl"
        path.write_text("".join(json.dumps(v) + "\n" for v in loaded))
        reports: list[dict[str, object]] = []
        assert db.load("vote", str(path), progress=reports.append) == (len(loaded), epoch + 1)
        epoch += 1
        env.model.apply("vote", loaded, [])
        assert reports and reports[-1]["fraction"] == 1.0
        assert {r["phase"] for r in reports} - {"reading"} == {"writing"}  # one pass
        env.check_views(db, epoch)

        # A write between loads, deleting some loaded votes.
        gone = loaded[:20]
        epoch = db.write("vote", delete=gone)
        env.model.apply("vote", [], gone)

        more = votes(rng, 2000, users=1000)
        folder = env.folder / "votes.parquet"
        spark.createDataFrame(
            [(v["article_id"], v["user_id"]) for v in more], "article_id int, user_id bigint"
        ).repartition(3).write.parquet(str(folder))
        assert db.load("vote", folder) == (len(more), epoch + 1)
        epoch += 1
        env.model.apply("vote", more, [])
        env.check_views(db, epoch)
        stats = db.stats()
        assert stats["durable_epoch"] == stats["applied_epoch"] == stats["flushed_epoch"] == epoch


def test_a_bad_row_is_refused_whole_and_changes_nothing(env: Env) -> None:
    with env.server.client() as db:
        before = db.stats()
        epoch = before["durable_epoch"]
        assert isinstance(epoch, int)
        rows = [f"{i % ARTICLES},{10_000 + i}" for i in range(100)]
        rows[35] = "abc,7"  # line 37: the header is line 1
        path = env.folder / "bad.csv"
        path.write_text("article_id,user_id\n" + "\n".join(rows) + "\n")
        with pytest.raises(InvalidArgument) as err:
            db.load("vote", path)
        assert str(err.value) == f"{path}:37: attribute 'article_id': 'abc' is not an int"
        with pytest.raises(InvalidArgument, match=r"no such file"):
            db.load("vote", env.folder / "missing.csv")
        with pytest.raises(NotFound, match=r"no source named 'voter'"):
            db.load("voter", path)
        after = db.stats()
        for counter in ("durable_epoch", "applied_epoch", "flushed_epoch"):
            assert after[counter] == before[counter], counter
        # None of the 99 good rows went in.
        env.check_views(db, epoch)
        assert db.write("vote", insert=[{"article_id": 1, "user_id": 77_777}]) == epoch + 1
        env.model.apply("vote", [{"article_id": 1, "user_id": 77_777}], [])


def _cli(env: Env, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pomoview.server.cli", "load", *args, "--address", env.server.address],
        cwd=env.folder,  # FILE is relative: the CLI makes it absolute
        capture_output=True,
        timeout=300,
    )


def test_cli_shows_a_progress_bar_and_the_count(env: Env) -> None:
    rng = random.Random(5)
    loaded = votes(rng, 1500, users=3000)
    write_csv(env.folder / "cli votes.csv", loaded, ["article_id", "user_id"])
    with env.server.client() as db:
        epoch = db.stats()["durable_epoch"]
        assert isinstance(epoch, int)
        done = _cli(env, "vote", "cli votes.csv")
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode() == f"loaded 1500 rows into vote at epoch {epoch + 1}\n"
        bar = done.stderr.decode()
        assert bar.startswith("\r[")  # redrawn in place
        assert "\r[" + "#" * 30 + "] 100% writing" in bar
        assert bar.endswith("\n")
        env.model.apply("vote", loaded, [])
        env.check_views(db, epoch + 1)

        (env.folder / "bad.jsonl").write_text('{"article_id": 1, "user_id": 2}\n{"article_id": 1}\n')
        refused = _cli(env, "vote", "bad.jsonl")
        assert refused.returncode == 1
        message = f"error: INVALID_ARGUMENT: {env.folder / 'bad.jsonl'}:2: missing attribute 'user_id'"
        assert message in refused.stderr.decode()
        assert db.stats()["durable_epoch"] == epoch + 1


def test_async_client_loads(env: Env) -> None:
    loaded = [{"article_id": ARTICLES + 1, "user_id": u} for u in range(30)]
    path = env.folder / "async.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in loaded))

    async def load() -> tuple[int, int]:
        async with AsyncClient(env.server.address) as db:
            return await db.load("vote", path, format="jsonl")

    with env.server.client() as db:
        epoch = db.stats()["durable_epoch"]
        assert isinstance(epoch, int)
        assert asyncio.run(load()) == (30, epoch + 1)
        env.model.apply("vote", loaded, [])
        env.check_views(db, epoch + 1)


def test_a_load_survives_sigkill(env: Env) -> None:
    rng = random.Random(3)
    loaded = votes(rng, 2500, users=5000)
    path = write_csv(env.folder / "last.csv", loaded, ["user_id", "article_id"])
    with env.server.client() as db:
        rows, epoch = db.load("vote", path)
    env.model.apply("vote", loaded, [])
    env.server.kill()  # right after the acknowledgement: nothing else had time to happen
    env.server = ServerProcess(env.server.data_dir).start()
    with env.server.client() as db:
        assert db.stats()["durable_epoch"] == epoch
        env.check_views(db, epoch)
        assert db.write("vote", insert=[{"article_id": 2, "user_id": 1}]) == epoch + 1
        env.model.apply("vote", [{"article_id": 2, "user_id": 1}], [])
        env.check_views(db, epoch + 1)
