"""The vote example end to end: real server process, real Spark, real gRPC, a Python oracle."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pomoview.client import Client
from pomoview.server.cli import explain
from pomoview.server.cli.commands import main

from .server_process import ServerProcess, wait_for_flush
from .votes_model import VotesModel


def _rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["title"])


def _check(client: Client, model: VotesModel, ids: list[int], epoch: int) -> None:
    for article_id in ids:
        got = client.lookup("articleWithVotes", {"id": article_id}, min_epoch=epoch)
        assert _rows(got) == model.view(article_id), f"article {article_id} at epoch {epoch}"


def test_vote_lookups_match_python_over_writes_and_deletes(votes_server: ServerProcess) -> None:
    rng = random.Random(20261121)
    model = VotesModel()
    n_articles = 40
    with votes_server.client() as db:
        articles = [{"id": i, "title": f"article {i}"} for i in range(n_articles)]
        epoch = db.write("article", insert=articles)
        model.apply("article", articles, [])
        # Cold lookups of a few keys before any vote: they upquery and stay present.
        early = [0, 1, 2, 3, 39]
        _check(db, model, early, epoch)
        written = 0
        while written < 3000:
            batch = []
            for _ in range(50):
                row = {"article_id": rng.randrange(n_articles), "user_id": rng.randrange(300)}
                batch.append(row)
            deletes = []
            if model.votes and rng.random() < 0.5:
                for a, u in rng.sample(sorted(model.votes), k=min(10, len(model.votes))):
                    deletes.append({"article_id": a, "user_id": u})
            # A batch may not insert and delete one tuple; keep the inserts that do not collide.
            gone = {(d["article_id"], d["user_id"]) for d in deletes}
            batch = [r for r in batch if (r["article_id"], r["user_id"]) not in gone]
            epoch = db.write("vote", insert=batch, delete=deletes)
            model.apply("vote", batch, deletes)
            written += len(batch)
            if rng.random() < 0.2:
                _check(db, model, rng.sample(range(n_articles), 3), epoch)
        # Retitle an article and delete another one, in one atomic batch.
        epoch = db.write_batch(
            {
                "article": (
                    [{"id": 5, "title": "renamed"}],
                    [{"id": 5, "title": "article 5"}, {"id": 6, "title": "article 6"}],
                )
            }
        )
        model.apply(
            "article",
            [{"id": 5, "title": "renamed"}],
            [{"id": 5, "title": "article 5"}, {"id": 6, "title": "article 6"}],
        )
        _check(db, model, list(range(n_articles)) + [n_articles + 1], epoch)
        stats = db.stats()
        assert stats["dropped_deltas"] > 0, "writes for keys nobody looked up were dropped"
        assert stats["upqueries"] > 0


def test_cold_keys_after_flush_read_parquet_plus_log(votes_server: ServerProcess) -> None:
    """A key first looked up after a flush reads the Parquet snapshot and the logged writes after it."""
    with votes_server.client() as db:
        base = 1000
        epoch = db.write("article", insert=[{"id": base + i, "title": f"t{i}"} for i in range(5)])
        db.write(
            "vote",
            insert=[{"article_id": base + i, "user_id": u} for i in range(5) for u in range(i)],
        )
        wait_for_flush(db, epoch + 1)
        epoch = db.write(
            "vote",
            insert=[{"article_id": base + 4, "user_id": 99}],
            delete=[{"article_id": base + 3, "user_id": 0}],
        )
        expected = {0: 0, 1: 1, 2: 2, 3: 2, 4: 5}
        for i, votes in expected.items():
            rows = db.lookup("articleWithVotes", {"id": base + i}, min_epoch=epoch)
            assert rows == [{"id": base + i, "title": f"t{i}", "votes": votes}]


def test_min_epoch_reads_your_writes(votes_server: ServerProcess) -> None:
    with votes_server.client() as db:
        article = 2000
        db.write("article", insert=[{"id": article, "title": "ryw"}])
        assert db.lookup("articleWithVotes", {"id": article}) is not None  # make the key present
        for user in range(20):
            epoch = db.write("vote", insert=[{"article_id": article, "user_id": user}])
            rows = db.lookup("articleWithVotes", {"id": article}, min_epoch=epoch)
            assert rows == [{"id": article, "title": "ryw", "votes": user + 1}]


def test_describe_and_stats_show_the_partial_states_of_a_view(votes_server: ServerProcess) -> None:
    """Through the real server: after a lookup, Describe(view) draws the view's dataflow and
    Stats lists its states, every one partial, holding the looked-up key."""
    from pomoview.client.errors import NotFound

    with votes_server.client() as db:
        epoch = db.write("article", insert=[{"id": 901, "title": "described"}])
        db.write("vote", insert=[{"article_id": 901, "user_id": 1}])
        assert db.lookup("articleWithVotes", {"id": 901}, min_epoch=epoch) in (
            [{"id": 901, "title": "described", "votes": 0}],
            [{"id": 901, "title": "described", "votes": 1}],
        )
        nodes = db.describe("articleWithVotes")["nodes"]
        assert isinstance(nodes, list)
        kinds = [n["operator"] for n in nodes]
        assert "AggregateJoin" in kinds and kinds[-1] == "Reader"
        ids = {n["id"] for n in nodes}
        assert all(set(n["inputs"]) <= ids for n in nodes)  # inputs first, a closed graph
        states = [n for n in db.stats()["states"] if n["stateful"]]  # type: ignore[union-attr]
        assert states and all(n["partial"] and n["present_keys"] >= 1 for n in states)
        assert db.describe()["nodes"] == []
        try:
            db.describe("nope")
        except NotFound as err:
            assert "nope" in str(err)
        else:
            raise AssertionError("an unknown view is NOT_FOUND")


def _cli(capsys: pytest.CaptureFixture[str], server: ServerProcess, *args: str) -> tuple[int, str, str]:
    """Runs `pomoview ARGS` in this process (a new one costs seconds on a loaded machine):
    its exit status, stdout and stderr."""
    capsys.readouterr()
    status = main([*args, "--address", server.address])
    out, err = capsys.readouterr()
    return status, out, err


def _held(nodes: object) -> dict[str, tuple[int, int]]:
    """Each state's (present keys, rows), by its operator's description."""
    assert isinstance(nodes, list)
    return {n["detail"]: (n["present_keys"], n["rows"]) for n in nodes if n["stateful"]}


def test_explain_draws_the_states_of_the_keys_looked_up(
    votes_server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: `explain` shows what Describe and Stats say, and the lookups of
    this test add exactly their keys, and the rows under them, to each state."""
    view = "articleWithVotes"
    articles = {5000: 3, 5003: 1, 5004: 0, 5005: 2}  # id -> its votes; ids no other test uses
    looked_up = [5000, 5003, 5004, 5999]  # 5999 is no article: present, with no row
    with votes_server.client() as db:
        before = _held(db.describe(view)["nodes"])  # what the module's other tests left
        db.write("article", insert=[{"id": a, "title": f"explained {a}"} for a in articles])
        epoch = db.write(
            "vote", insert=[{"article_id": a, "user_id": u} for a, n in articles.items() for u in range(n)]
        )
        # In one call: one round of Spark jobs for the four keys.
        got = db.lookup_many(view, [{"id": a} for a in looked_up], min_epoch=epoch)
        assert {key: list(rows) for key, rows in got.items()} == {
            (a,): [{"id": a, "title": f"explained {a}", "votes": articles[a]}] if a in articles else []
            for a in looked_up
        }
        # Once as the installed command would run, in a process of its own.
        command = [sys.executable, "-m", "pomoview.server.cli", "explain", view, "--text"]
        text = subprocess.run(
            [*command, "--address", votes_server.address], capture_output=True, text=True, timeout=120
        )
        dot = _cli(capsys, votes_server, "explain", view, "-o", "-")
        svg = _cli(capsys, votes_server, "explain", view, "-o", str(tmp_path / "v.svg"))
        nodes = db.describe(view)["nodes"]
        states = db.stats()["states"]
    assert isinstance(nodes, list) and states == nodes  # one view, nothing moved in between
    assert (text.returncode, dot[0], svg[0]) == (0, 0, 0), text.stderr + dot[2] + svg[2]
    # The states against the keys looked up: each gained those 4 keys, and the rows under them.
    added = {
        detail: (keys - before.get(detail, (0, 0))[0], rows - before.get(detail, (0, 0))[1])
        for detail, (keys, rows) in _held(nodes).items()
    }
    found = sum(a in articles for a in looked_up)
    assert added["SourceIndex(article by ('id',), partial)"] == (len(looked_up), found)
    assert added["SourceIndex(vote by ('article_id',), partial)"] == (
        len(looked_up),
        sum(articles.get(a, 0) for a in looked_up),
    )
    assert added["Reader('id', 'title', 'votes')"] == (len(looked_up), found)
    assert all(n["partial"] for n in nodes if n["stateful"])
    # The CLI's pictures are those of this Describe answer.
    assert dot[1] == explain.to_dot(view, nodes)
    assert text.stdout == explain.to_text(view, nodes) + "\n"
    for node in nodes:
        assert f"{node['id']} {node['detail']}" in text.stdout
        if node["stateful"]:
            assert f"{node['present_keys']} keys, {node['rows']} rows" in text.stdout
    if shutil.which("dot") is None:
        assert "apt-get install graphviz" in svg[2] and (tmp_path / "v.dot").read_text() == dot[1]
        return
    ns = {"s": "http://www.w3.org/2000/svg"}
    drawn = {
        g.findtext("s:title", namespaces=ns): [t.text for t in g.findall("s:text", ns)]
        for g in ET.parse(tmp_path / "v.svg").getroot().iter("{http://www.w3.org/2000/svg}g")
        if g.get("class") == "node"
    }
    assert drawn == {n["id"]: explain.label_lines(n) for n in nodes}
