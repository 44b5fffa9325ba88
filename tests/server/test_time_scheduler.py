"""`@next` rules and transient sources served by the scheduler, in-process over real Spark and
real files, against the in-process engine on the same epochs, across flushes and restarts."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from pomoview.engine.engine import Engine
from pomoview.server.errors import FailedPrecondition
from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.temporal.time_state import Checkpoint

# The programs are shared with tests/e2e/test_time.py, next to which they live.
sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from time_programs import CHECKBOX, DOMAIN, LATCH, PROGRAMS, SEEN, Epoch, expected, random_epoch  # noqa: E402


def typed(values: dict[str, object]) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string", float: "float", bool: "bool"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def start(data: Path, spark: Any) -> Scheduler:
    scheduler = Scheduler(data, lambda: spark, flush_interval=3600)
    scheduler.start()
    return scheduler


def write(s: Scheduler, epoch: Epoch) -> int:
    sources = sorted(set(epoch.inserts) | set(epoch.deletes))
    ins, dels = epoch.inserts, epoch.deletes
    return s.write(
        [(s_, [typed(r) for r in ins.get(s_, [])], [typed(r) for r in dels.get(s_, [])]) for s_ in sources]
    )


def answers(s: Scheduler, engine: Engine, epoch: int) -> dict[tuple[str, int], set[tuple[object, ...]]]:
    out = {}
    for view, key in engine.program.views.items():
        [attr] = key
        attrs = engine.attributes(view)
        groups, at = s.lookup(view, [typed({attr: v}) for v in DOMAIN], min_epoch=epoch)
        assert at >= epoch
        for value, rows in zip(DOMAIN, groups, strict=True):
            out[(view, value)] = {tuple(r[a] for a in attrs) for r in rows}
    return out


def run(name: str, seed: int, epochs: int, tmp_path: Path, spark: Any) -> None:
    """Random epochs; after each, every view's answer equals the engine's; now and then a
    flush (a checkpoint) or a restart of the scheduler over the same files."""
    rng = random.Random(seed)
    text = PROGRAMS[name]
    engine = Engine(text)
    data = tmp_path / f"{name}-{seed}"
    s = start(data, spark)
    try:
        s.install(text)
        for step in range(1, epochs + 1):
            batch = random_epoch(name, rng)
            got = write(s, batch)
            assert got == engine.write(batch.inserts, batch.deletes) == step
            assert answers(s, engine, got) == expected(engine), f"seed {seed} epoch {step}"
            roll = rng.random()
            if roll < 0.25:
                s.flush()
            elif roll < 0.45:
                s.stop()
                s = start(data, spark)
                assert s.durable_epoch == step
                assert answers(s, engine, got) == expected(engine), f"seed {seed} epoch {step}, restarted"
    finally:
        s.stop()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_random_epochs_equal_the_engine(name: str, tmp_path: Path, spark: Any) -> None:
    run(name, 1, 10, tmp_path, spark)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 12))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_random_epochs_equal_the_engine_sweep(name: str, seed: int, tmp_path: Path, spark: Any) -> None:
    run(name, seed, 30, tmp_path, spark)


def test_transient_tuples_never_reach_the_store(tmp_path: Path, spark: Any) -> None:
    s = start(tmp_path / "data", spark)
    try:
        s.install(SEEN)
        s.write([("ping", [typed({"x": 1})], []), ("point", [typed({"x": 1, "y": 2})], [])])
        epoch = s.write([("ping", [typed({"x": 2})], [])])
        assert s.lookup("pinged", [typed({"x": 1})], min_epoch=epoch)[0] == [[{"x": 1, "n": 0}]]
        assert s.flush() == epoch  # the applied epoch: the lookup waited for it
        assert s.tail.batches == []  # the log behind the store is gone
        checkpoint = Checkpoint.read(s.data_dir)
        assert checkpoint is not None and checkpoint.epoch == epoch
        assert checkpoint.transient["ping"][1] == {(2,)}  # this epoch's events, for a restart
        with s.store.pinned() as pin:
            assert s.store.fetch("ping", (), [()], {}, at=pin)[1] == []
            assert s.store.fetch("point", (), [()], {}, at=pin)[1] == [(1, 2)]
    finally:
        s.stop()


def test_reinstall_keeps_the_state_of_unchanged_relations(tmp_path: Path, spark: Any) -> None:
    """Installing again carries `p@next` for a relation whose attributes and types are
    unchanged; time goes on from the applied epoch."""
    engine = Engine(LATCH)
    s = start(tmp_path / "data", spark)
    try:
        s.install(LATCH)
        batch = Epoch({"press": [{"id": 1}], "member": [{"g": 0, "id": 1}]}, {})
        assert write(s, batch) == engine.write(batch.inserts)
        epoch = write(s, Epoch({}, {}))
        engine.write()
        assert answers(s, engine, epoch) == expected(engine)
        s.install(LATCH + "view member2(g).\nmember2(g: G) :- member(g: G).\n")
        assert s.lookup("latched", [typed({"id": 1})])[0] == [[{"id": 1}]]
    finally:
        s.stop()


def test_a_source_cannot_change_its_transience(tmp_path: Path, spark: Any) -> None:
    s = start(tmp_path / "data", spark)
    try:
        s.install(CHECKBOX)
        epoch = s.write([("clicks", [typed({"id": 1})], [])])
        with pytest.raises(FailedPrecondition) as refused:
            s.install("source clicks(id: int).\nview c(id).\nc(id: I) :- clicks(id: I).\n", "flip.pomo")
        assert "flip.pomo:1:1: error: source 'clicks' was declared transient" in str(refused.value)
        assert s.durable_epoch == epoch and s.program is not None and "checkbox" in s.program.views
    finally:
        s.stop()
