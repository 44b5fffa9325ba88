"""After a crash (SIGKILL) and a restart on the same data folder, every acknowledged write is there."""

from __future__ import annotations

import random
from pathlib import Path

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel


def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    rng = random.Random(7)
    model = VotesModel()
    data = tmp_path / "data"
    server = ServerProcess(data, program=VOTES, flush_interval=1.0).start()
    try:
        with server.client() as db:
            articles = [{"id": i, "title": f"a{i}"} for i in range(10)]
            db.write("article", insert=articles)
            model.apply("article", articles, [])
            epoch = 0
            for _ in range(10):
                votes = [{"article_id": rng.randrange(10), "user_id": rng.randrange(50)} for _ in range(30)]
                epoch = db.write("vote", insert=votes)
                model.apply("vote", votes, [])
            wait_for_flush(db, epoch)  # these are in Parquet
            for _ in range(5):  # these may be only in the log when the process dies
                present = sorted(model.votes)
                deletes = [{"article_id": a, "user_id": u} for a, u in rng.sample(present, 5)]
                votes = [
                    {"article_id": rng.randrange(10), "user_id": 100 + rng.randrange(50)} for _ in range(10)
                ]
                epoch = db.write("vote", insert=votes, delete=deletes)
                model.apply("vote", votes, deletes)
            before = {i: db.lookup("articleWithVotes", {"id": i}, min_epoch=epoch) for i in range(10)}
    finally:
        server.kill()
    restarted = ServerProcess(data, flush_interval=1.0).start()  # the program is stored, not passed
    try:
        with restarted.client() as db:
            assert db.stats()["durable_epoch"] == epoch
            for i in range(10):
                rows = sorted(db.lookup("articleWithVotes", {"id": i}, min_epoch=epoch), key=str)
                assert rows == model.view(i), f"article {i}"
                assert rows == sorted(before[i], key=str)
            # The restarted server keeps accepting and applying writes.
            next_epoch = db.write("vote", insert=[{"article_id": 0, "user_id": 9999}])
            assert next_epoch == epoch + 1
            model.apply("vote", [{"article_id": 0, "user_id": 9999}], [])
            assert db.lookup("articleWithVotes", {"id": 0}, min_epoch=next_epoch) == model.view(0)
    finally:
        restarted.stop()
