"""A batched step in a real server process (server/scheduler/applier.py): durable batches
queued behind a held apply are applied as one step. While that step is held half done, hits
answer from the last published epoch and say so; once it is published they see the step's
last epoch. And a SIGKILL in the middle of such a step loses nothing acknowledged: after a
restart every key equals a plain-Python model of the acknowledged batches.

The gates are the applier's test gates (server/scheduler/gates.py): files in a folder the
test owns, so the test synchronizes on the server's own state, never on time.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import grpc

from pomoview.client import Client
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc
from pomoview.server.scheduler.gates import GATE_ENV

from .server_process import VOTES, ServerProcess
from .votes_model import VotesModel

VIEW = "articleWithVotes"
ARTICLES = 20
STEP_BATCHES = 8


def _wait_for(path: Path, server: ServerProcess, timeout: float = 60.0) -> str:
    """The content of `path` once the server wrote it (the gate was reached)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert server.process is not None and server.process.poll() is None, "the server exited"
        assert time.monotonic() < deadline, f"the apply never reached its gate ({path.name})"
        time.sleep(0.01)  # polling the server's own marker, not waiting for time to pass
    return path.read_text()


def _hit_epoch(address: str, ids: list[int]) -> tuple[int, list[int]]:
    """A lookup through the raw stub: the answer's epoch, and each id's vote count."""
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ViewServiceStub(channel)
        keys = [pb.Row(fields={"id": pb.Value(int_value=i)}) for i in ids]
        response = stub.Lookup(pb.LookupRequest(view=VIEW, keys=keys), timeout=60)
    counts = [sum(r.fields["votes"].int_value for r in key.rows) for key in response.results]
    return response.epoch, counts


def _write_batches(client: Client, model: VotesModel, rng: random.Random, user: int) -> tuple[list[int], int]:
    """STEP_BATCHES acknowledged batches of votes, some deleting earlier votes; each applied to
    the model once acknowledged. Returns their epochs and the next user id."""
    epochs = []
    for _ in range(STEP_BATCHES):
        inserts = []
        for _ in range(rng.randrange(1, 30)):
            user += 1
            inserts.append({"article_id": rng.randrange(1, ARTICLES + 1), "user_id": user})
        present = sorted(model.votes)
        deletes = [{"article_id": a, "user_id": u} for a, u in rng.sample(present, min(3, len(present)))]
        epochs.append(client.write_batch({"vote": (inserts, deletes)}))
        model.apply("vote", inserts, deletes)
    return epochs, user


def _model_counts(model: VotesModel) -> list[int]:
    return [model.view(i)[0]["votes"] for i in range(1, ARTICLES + 1)]


def test_a_held_batched_step_is_invisible_until_published_and_survives_a_sigkill(tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    data = tmp_path / "data"
    rng = random.Random(21)
    model = VotesModel()
    ids = list(range(1, ARTICLES + 1))
    server = ServerProcess(
        data,
        VOTES,
        flush_interval=3600.0,  # nothing reaches Parquet: the restart replays the log
        extra_args=["--max-apply-lag", "600"],  # writers must not wait for the held apply
        env={GATE_ENV: str(gates)},
    ).start()
    try:
        client = server.client()
        articles = [{"id": i, "title": f"t{i}"} for i in ids]
        first = client.write("article", articles)
        model.apply("article", articles, [])
        user = 0
        for rnd in range(2):
            client.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=first)  # warm: state to change
            published, before = _hit_epoch(server.address, ids)
            assert before == _model_counts(model)
            (gates / "hold").write_text("")
            held_counts = _model_counts(model)
            epochs, user = _write_batches(client, model, rng, user)
            (gates / "reached").unlink(missing_ok=True)
            (gates / "mid").write_text("")
            (gates / "hold").unlink()
            reached = _wait_for(gates / "reached", server)
            assert reached == f"{epochs[0]} {epochs[-1]} {STEP_BATCHES}", "the held batches were not one step"
            # Half done: hits answer from the last published epoch, and say which.
            epoch, counts = _hit_epoch(server.address, ids)
            assert epoch == published < epochs[0] and counts == held_counts
            if rnd == 0:
                (gates / "mid").unlink()
                got = client.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=epochs[-1])
                assert [rows[0]["votes"] for rows in got.values()] == _model_counts(model)
                epoch, counts = _hit_epoch(server.address, ids)
                assert epoch == epochs[-1] and counts == _model_counts(model)
        server.kill()  # in the middle of the second batched step, every batch acknowledged
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()
    restarted = ServerProcess(data, VOTES, flush_interval=3600.0).start()
    try:
        client = restarted.client()
        got = client.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=epochs[-1])
        assert [rows for rows in got.values()] == [model.view(i) for i in ids]
    finally:
        restarted.stop()
