"""`--memory-budget` end to end: a real server with a budget far below what the vote view's
keys need evicts partial state (least recently used keys, below included) and still answers
every lookup exactly, against a Python model, while writes go on; a bad budget is refused at
start with a message naming the flag."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_a_small_budget_evicts_and_answers_stay_exact(tmp_path: Path) -> None:
    rng = random.Random(7)
    model = VotesModel()
    server = ServerProcess(
        tmp_path / "data", program=VOTES, flush_interval=0.5, extra_args=["--memory-budget", "256K"]
    ).start()
    try:
        with server.client() as db:
            articles = [{"id": i, "title": f"article {i} " + "x" * 200} for i in range(400)]
            db.write("article", insert=articles)
            model.apply("article", articles, [])
            for start in range(0, 40_000, 4000):
                batch = [{"article_id": rng.randrange(400), "user_id": start + j} for j in range(4000)]
                epoch = db.write("vote", insert=batch)
                model.apply("vote", batch, [])
            wait_for_flush(db, epoch)
            for rounds in range(3):
                keys = list(range(400))
                rng.shuffle(keys)
                for i in range(0, 400, 20):
                    ids = keys[i : i + 20]
                    got = db.lookup_many("articleWithVotes", [{"id": k} for k in ids])
                    for k in ids:
                        assert sorted(got[(k,)], key=lambda r: r["title"]) == model.view(k), f"article {k}"
                # Writes to present and evicted keys alike between the rounds.
                batch = [
                    {"article_id": rng.randrange(400), "user_id": 10**6 + rounds * 100 + j}
                    for j in range(100)
                ]
                epoch = db.write("vote", insert=batch)
                model.apply("vote", batch, [])
                assert db.lookup("articleWithVotes", {"id": batch[0]["article_id"]}, min_epoch=epoch) == (
                    model.view(batch[0]["article_id"])
                )
            stats = db.stats()
            memory = stats["memory"]
            assert memory["budget"] == 256 << 10
            assert memory["eviction_rounds"] > 0, memory
            evicted = {s["operator"]: s["evictions"] for s in stats["states"] if s["stateful"]}
            assert sum(evicted.values()) > 0, evicted
            reader = next(r for r in stats["readers"] if r["view"] == "articleWithVotes")
            assert reader["present_keys"] < 400, "some reader keys were evicted"
    finally:
        server.stop()


def test_a_budget_that_is_not_a_size_is_refused_at_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pomoview.server.cli",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--memory-budget",
            "lots",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--memory-budget" in done.stderr and "'lots' is not a size in bytes" in done.stderr
