"""A store at a URI, through the Spark JVM's Hadoop client: the code path of hdfs:// and
s3a:// stores, run here on the local file system (`hadoop+file://`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_a_store_through_hadoop_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = tmp_path / "remote"
    location = f"hadoop+file://{store}"
    model = VotesModel()
    server = ServerProcess(data, program=VOTES, flush_interval=0.3, extra_args=["--store", location]).start()
    try:
        with server.client() as db:
            articles = [{"id": i, "title": f"t{i}"} for i in range(4)]
            db.write("article", insert=articles)
            model.apply("article", articles, [])
            votes = [{"article_id": 1, "user_id": u} for u in range(3)]
            db.write("vote", insert=votes)
            model.apply("vote", votes, [])
            gone = [{"article_id": 1, "user_id": 0}]
            epoch = db.write("vote", delete=gone)
            model.apply("vote", [], gone)
            wait_for_flush(db, epoch)
            assert db.lookup("articleWithVotes", {"id": 1}) == model.view(1)
    finally:
        server.stop()
    # Versioned manifests, the latest listing the flushed parts; never a manifest.json.
    manifests = sorted(store.glob("manifest-*.json"))
    assert len(manifests) == 1 and not (store / "manifest.json").exists()
    doc = json.loads(manifests[-1].read_text())
    assert doc["version"] == epoch
    for source in ("article", "vote"):
        assert doc["sources"][source]["parts"], source
        assert list((store / source).glob("part-*/b*.parquet")), source
    assert not (data / "store").exists()
    assert f"store={location} (flag)" in server.log_path.read_text()

    # After a restart the lookups answer from Parquet, read through Hadoop again, and writes
    # go on from the store's version.
    server = ServerProcess(data, flush_interval=0.3, extra_args=["--store", location]).start()
    try:
        with server.client() as db:
            assert db.stats()["flushed_epoch"] == epoch
            for article in range(4):
                assert db.lookup("articleWithVotes", {"id": article}) == model.view(article)
            assert db.stats()["spark_jobs"] > 0  # the lookups read the Parquet parts
            more = [{"article_id": 2, "user_id": 9}]
            later = db.write("vote", insert=more)
            model.apply("vote", more, [])
            assert later > epoch
            wait_for_flush(db, later)
            assert db.lookup("articleWithVotes", {"id": 2}) == model.view(2)
    finally:
        server.stop()
    assert json.loads(sorted(store.glob("manifest-*.json"))[-1].read_text())["version"] == later
