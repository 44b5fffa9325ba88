"""`serve --hit-replica` end to end: the real server process with its replica process in
front, real Spark, real gRPC. Hits are answered by the replica from its copy of the readers
and equal a plain-Python model after random writes; no read through it is older than one
before it; errors, subscriptions and installs pass through; the replica ends with its
server, even a killed one."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import InvalidArgument, NotFound
from pomoview.server.scheduler.gil_policy import SWITCH_INTERVAL_WITH_REPLICA

from .server_process import VOTES, ServerProcess
from .votes_model import VotesModel


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = Path(tmp_path_factory.mktemp("replica")) / "data"
    process = ServerProcess(data, program=VOTES, extra_args=["--hit-replica"]).start()
    yield process
    process.stop()


def replica_pid(server: ServerProcess) -> int:
    """The server's child running the hit replica."""
    assert server.process is not None
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    replicas = [int(c) for c in children if b"hit_replica" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert len(replicas) == 1, children
    return replicas[0]


def wait_until(what: str, done: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def test_hits_come_from_the_replica_and_equal_the_model_under_random_writes(server: ServerProcess) -> None:
    rng = random.Random(11)
    model = VotesModel()
    ids = range(100, 120)
    with server.client() as db:
        before = db.stats()["replica_hits"]
        epoch = db.write("article", insert=[{"id": i, "title": f"a{i}"} for i in ids])
        model.apply("article", [{"id": i, "title": f"a{i}"} for i in ids], [])
        for _ in range(40):
            insert = [{"article_id": rng.choice(ids), "user_id": rng.randrange(50)} for _ in range(5)]
            delete = [
                {"article_id": a, "user_id": u}
                for a, u in rng.sample(sorted(model.votes), min(2, len(model.votes)))
            ]
            insert = [v for v in insert if (v["article_id"], v["user_id"]) not in model.votes]
            epoch = db.write("vote", insert=insert, delete=delete)
            model.apply("vote", insert, delete)
            key = rng.choice(ids)
            assert db.lookup("articleWithVotes", {"id": key}, min_epoch=epoch) == model.view(key)
            # No min_epoch: a hit at the replica, which may not answer older than the above.
            assert db.lookup("articleWithVotes", {"id": key}) == model.view(key)
            many = db.lookup_many("articleWithVotes", [{"id": k} for k in ids[:5]], min_epoch=epoch)
            assert many == {(k,): model.view(k) for k in ids[:5]}
        wait_until("the replica reports its hits", lambda: db.stats()["replica_hits"] >= before + 40)


def test_errors_come_from_the_server_in_its_words(server: ServerProcess) -> None:
    with server.client() as db:
        with pytest.raises(NotFound, match="no view named 'nope'"):
            db.lookup("nope", {"id": 1})
        with pytest.raises(InvalidArgument, match="has no attribute 'ident'"):
            db.lookup("articleWithVotes", {"ident": 1})


def test_subscriptions_and_installs_pass_through(server: ServerProcess) -> None:
    with server.client() as db:
        db.write("article", insert=[{"id": 500, "title": "s"}])
        with db.subscribe("articleWithVotes", [{"id": 500}]) as sub:
            changes = iter(sub)
            assert next(changes).snapshot
            db.write("vote", insert=[{"article_id": 500, "user_id": 1}])
            change = next(changes)
            assert [r["votes"] for r in change.inserts] == [1]
        epoch = db.write("vote", insert=[{"article_id": 500, "user_id": 2}])
        assert db.lookup("articleWithVotes", {"id": 500}, min_epoch=epoch)[0]["votes"] == 2
        db.lookup("articleWithVotes", {"id": 500})  # present at the replica
        db.install(VOTES.read_text().replace("votes: N)", "votes: N, again: Id)"))
        # The replica's copy of the old program's reader went with it: no row without `again`.
        assert db.lookup("articleWithVotes", {"id": 500}) == [
            {"id": 500, "title": "s", "votes": 2, "again": 500}
        ]
        assert db.lookup("articleWithVotes", {"id": 500}) == [
            {"id": 500, "title": "s", "votes": 2, "again": 500}
        ]
        db.install(VOTES.read_text())


def test_an_evicted_key_leaves_the_replicas_copy(server: ServerProcess) -> None:
    """Evict at the server drops the key from the replica's copy too (the feed sends the
    eviction, in order, before the write after it): a write that meets the evicted key is
    dropped at the server, so a copy left at the replica would answer it stale."""
    with server.client() as db:
        db.write("article", insert=[{"id": 600, "title": "e"}])
        epoch = db.write("vote", insert=[{"article_id": 600, "user_id": 1}])
        assert db.lookup("articleWithVotes", {"id": 600}, min_epoch=epoch)[0]["votes"] == 1
        hits = db.stats()["replica_hits"]
        db.lookup("articleWithVotes", {"id": 600})
        wait_until("a hit at the replica", lambda: db.stats()["replica_hits"] > hits)
        assert db.evict("articleWithVotes", [{"id": 600}])["keys_evicted"] == 1
        epoch = db.write("vote", insert=[{"article_id": 600, "user_id": 2}])
        assert db.lookup("articleWithVotes", {"id": 600}, min_epoch=epoch)[0]["votes"] == 2


def test_the_replica_ends_with_its_killed_server(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", program=VOTES, extra_args=["--hit-replica"]).start()
    pid = replica_pid(server)
    server.kill()
    wait_until("the replica exits", lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid))


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_port_in_use_is_refused_at_once(server: ServerProcess, tmp_path: Path) -> None:
    port = server.address.rsplit(":", 1)[1]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pomoview.server.cli",
            "serve",
            "--data",
            str(tmp_path / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--hit-replica",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"pomoview: cannot listen on 127.0.0.1:{port}" in done.stderr


def test_a_bad_write_is_refused_in_the_servers_words(server: ServerProcess) -> None:
    """Writes go to the server over the replica's socket, and come back with its status."""
    with server.client() as db:
        unknown = r"changes\[0\]: unknown source 'nope' \(sources: article, vote\)"
        with pytest.raises(InvalidArgument, match=unknown):
            db.write("nope", insert=[{"x": 1}])
        with pytest.raises(InvalidArgument, match="title"):
            db.write("article", insert=[{"id": 1, "title": 7}])
        epoch = db.write("article", insert=[{"id": 900, "title": "ok"}])
        assert db.lookup("articleWithVotes", {"id": 900}, min_epoch=epoch) == [
            {"id": 900, "title": "ok", "votes": 0}
        ]


def test_the_servers_process_holds_the_interpreter_lock_longer(server: ServerProcess) -> None:
    """scheduler/gil_policy.py: with its hits at the replica, the server's process sets the
    longer switch interval (the apply's steps are cut into fewer slices)."""
    log = server.log_path.read_text()
    interval = f"{SWITCH_INTERVAL_WITH_REPLICA * 1000:.1f} ms"
    assert f"interpreter switch interval: {interval} (hits answered by the replica)" in log, log[-2000:]
