"""The spec's checkbox (pomo_logic §2.1) over the real server: clicks written as transient
tuples through the real client, answers equal to the in-process engine's after every epoch,
across a restart and a SIGKILL in the middle of a stream of clicks.

One data folder and three server processes in one test (each start costs seconds): the
story is one history of epochs, and each phase checks the one before it survived.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

from pomoview.client import Client, PomoviewError
from pomoview.engine.engine import Engine

from .server_process import ServerProcess, wait_for_flush
from .time_programs import CHECKBOX, DOMAIN, Epoch, random_epoch

SEED = 11


def answers(db: Client, epoch: int) -> set[tuple[int, bool]]:
    got = db.lookup_many("checkbox", [{"id": i} for i in DOMAIN], min_epoch=epoch)
    return {(row["id"], row["state"]) for rows in got.values() for row in rows}  # type: ignore[misc]


def want(engine: Engine) -> set[tuple[int, bool]]:
    return engine.read("checkbox")  # type: ignore[return-value]


def write(db: Client, engine: Engine, batch: Epoch) -> int:
    epoch = db.write_batch({s: (rows, []) for s, rows in batch.inserts.items()})
    assert epoch == engine.write(batch.inserts)
    return epoch


def test_checkbox_across_restarts_and_a_kill(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    engine = Engine(CHECKBOX)
    data = tmp_path / "data"
    server = ServerProcess(data, flush_interval=0.5).start()
    try:
        with server.client() as db:
            db.install(CHECKBOX, "checkbox.pomo")
            for _ in range(8):
                epoch = write(db, engine, random_epoch("checkbox", rng))
                assert answers(db, epoch) == want(engine), f"epoch {epoch}"
            assert db.write_batch({}) == engine.write() == epoch + 1  # an empty epoch: time moves
            epoch += 1
            assert answers(db, epoch) == want(engine)
            wait_for_flush(db, epoch)  # so that the restart reads a checkpoint, then the log
            epoch = write(db, engine, random_epoch("checkbox", rng))
        # A clean restart (SIGTERM): the @next state continues where it was.
        assert server.stop() == 0
        server = ServerProcess(data, flush_interval=0.5).start()
        with server.client() as db:
            assert db.stats()["applied_epoch"] == epoch
            assert answers(db, epoch) == want(engine)
            for _ in range(4):
                epoch = write(db, engine, random_epoch("checkbox", rng))
                assert answers(db, epoch) == want(engine), f"epoch {epoch}, after the restart"

            # A stream of clicks, killed in the middle: every acknowledged one counts.
            acked: list[Epoch] = []
            in_flight: list[Epoch] = []
            stop = threading.Event()

            def clicker() -> None:
                with server.client() as writer:
                    while not stop.is_set():
                        batch = random_epoch("checkbox", rng)
                        in_flight[:] = [batch]
                        try:
                            writer.write_batch({s: (rows, []) for s, rows in batch.inserts.items()})
                        except PomoviewError:
                            return
                        acked.append(batch)
                        in_flight.clear()

            thread = threading.Thread(target=clicker)
            thread.start()
            while len(acked) < 25:
                threading.Event().wait(0.005)
            server.kill()
            stop.set()
            thread.join(timeout=60)
        for batch in acked:
            engine.write(batch.inserts)

        server = ServerProcess(data, flush_interval=0.5).start()
        with server.client() as db:
            durable = db.stats()["applied_epoch"]
            assert isinstance(durable, int)
            committed = durable - epoch
            # The batch in flight at the kill may have committed (logged, not acknowledged).
            assert committed in (len(acked), len(acked) + 1), (committed, len(acked))
            if committed == len(acked) + 1:
                engine.write(in_flight[0].inserts)
            assert engine.epoch == durable
            assert answers(db, durable) == want(engine)
            epoch = write(db, engine, Epoch({"clicks": [{"id": i} for i in DOMAIN]}, {}))
            epoch = write(db, engine, Epoch({}, {}))
            assert answers(db, epoch) == want(engine)
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()
