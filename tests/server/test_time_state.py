"""The durable @next state (server/time_state.py): its checkpoint, its steps against the
engine, and the scheduler's recovery from a checkpoint ahead of the store. No Spark: the
programs here read transient sources only, so nothing is ever fetched from the store."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from pomoview.dataflow.node import Filters
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.engine.engine import Engine
from pomoview.planner.compile import compile_program
from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.temporal.time_state import Checkpoint, TimeState
from pomoview.server.types import LoggedBatch, SourceChange

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from time_programs import CHECKBOX, DOMAIN, Epoch, random_epoch  # noqa: E402


def no_store(source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
    raise AssertionError(f"{source} was fetched from the store")


def no_spark() -> object:
    raise AssertionError("Spark was asked for")


def batch(epoch: int, inserts: dict[str, list[dict[str, object]]], program: Any) -> LoggedBatch:
    changes = {}
    for source, rows in inserts.items():
        attrs = program.relations[source].attributes
        changes[source] = SourceChange(tuple(tuple(r[a] for a in attrs) for r in rows), ())
    return LoggedBatch(epoch, changes)


def test_checkpoint_round_trip_keeps_every_type_apart(tmp_path: Path) -> None:
    sig = (("i", "int"), ("f", "float"), ("b", "bool"), ("s", "string"), ("y", "bytes"))
    rows: set[Row] = {(1, 1.0, True, "1", b"\x00\xff"), (-(2**63), float("inf"), False, "", b"")}
    clicks = ((("id", "int"),), {(3,)})
    written = Checkpoint(7, "digest", {"p": (sig, rows)}, {"clicks": clicks}, frozenset({"x"}))
    written.write(tmp_path)
    read = Checkpoint.read(tmp_path)
    assert read == written
    assert read is not None
    for row in read.next["p"][1]:
        assert tuple(type(v) for v in row) == (int, float, bool, str, bytes)
    assert not (tmp_path / "time_state.tmp").exists()


def test_steps_equal_the_engine_and_resume_from_a_checkpoint(tmp_path: Path) -> None:
    """TimeState stepped epoch by epoch holds what the engine's p@next and transient sources
    hold; a state read back from its checkpoint at any epoch, rebuilt and stepped on, too."""
    rng = random.Random(3)
    program = compile_program(CHECKBOX)
    engine = Engine(CHECKBOX)
    state = TimeState(program, 0)
    state.build(no_store)
    for epoch in range(1, 25):
        step = random_epoch("checkbox", rng)
        engine.write(step.inserts)
        state.advance(batch(epoch, step.inserts, program), lambda b: {})
        assert state.epoch == epoch
        assert state.next["checkbox"] == engine.store["checkbox@next"]
        for source in ("clicks", "created"):
            assert state.transient[source] == engine.store[source]
        assert state.held["checkbox"] == engine._next["checkbox"]
        if epoch % 5 == 0:
            state.checkpoint(frozenset({"clicks", "created"})).write(tmp_path)
            resumed = Checkpoint.read(tmp_path)
            state = TimeState(program, resumed.epoch, resumed)  # type: ignore[arg-type]
            assert state.circuits is None
            state.build(no_store)
            assert state.held["checkbox"] == engine._next["checkbox"]


def test_state_is_carried_only_for_an_unchanged_signature() -> None:
    program = compile_program(CHECKBOX)
    carried = Checkpoint(
        4,
        "old",
        {"checkbox": ((("id", "int"), ("state", "bool")), {(1, True)})},
        {
            "clicks": ((("id", "string"),), {("1",)}),
            "created": ((("id", "int"), ("state", "bool")), {(2, False)}),
        },
    )
    state = TimeState(program, 4, carried)
    assert state.next == {"checkbox": {(1, True)}}
    assert state.transient == {"clicks": set(), "created": {(2, False)}}  # clicks changed type


def typed(values: dict[str, object]) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", bool: "bool"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def answers(s: Scheduler, epoch: int) -> set[tuple[object, ...]]:
    groups, _ = s.lookup("checkbox", [typed({"id": i}) for i in DOMAIN], min_epoch=epoch)
    return {(r["id"], r["state"]) for rows in groups for r in rows}


def write(s: Scheduler, engine: Engine, step: Epoch) -> int:
    epoch = s.write([(src, [typed(r) for r in rows], []) for src, rows in sorted(step.inserts.items())])
    assert epoch == engine.write(step.inserts)
    return epoch


def test_restart_from_a_checkpoint_ahead_of_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the flusher's checkpoint and before the store published its epoch leaves
    the checkpoint ahead of the store: the restart starts from the checkpoint, and replays
    the log after it, not after the store."""
    rng = random.Random(5)
    engine = Engine(CHECKBOX)
    s = Scheduler(tmp_path, no_spark, flush_interval=3600)
    s.start()
    try:
        s.install(CHECKBOX)
        for _ in range(4):
            epoch = write(s, engine, random_epoch("checkbox", rng))
        assert answers(s, epoch) == engine.read("checkbox")
        assert s.flush() == epoch
        for _ in range(3):
            epoch = write(s, engine, random_epoch("checkbox", rng))
        assert answers(s, epoch) == engine.read("checkbox")

        def crash(batches: object) -> int:
            raise OSError("the disk went away")

        monkeypatch.setattr(s.store, "flush", crash)
        with pytest.raises(OSError):
            s.flush()
        checkpoint = Checkpoint.read(tmp_path)
        assert checkpoint is not None and checkpoint.epoch == epoch > s.store.version
    finally:
        s.stop()
    s = Scheduler(tmp_path, no_spark, flush_interval=3600)
    s.start()
    try:
        assert s.time is not None and s.time.epoch == epoch
        assert answers(s, epoch) == engine.read("checkbox")
        for _ in range(3):
            epoch = write(s, engine, random_epoch("checkbox", rng))
            assert answers(s, epoch) == engine.read("checkbox")
        assert s.flush() == epoch
    finally:
        s.stop()


def test_partial_states_over_next_state_refill_after_eviction(tmp_path: Path) -> None:
    """A partial state above `checkbox@next` and the transient sources, evicted between
    epochs, is refilled from the state at the same epoch (provenance.py keeps it partial):
    the answers stay the engine's, and keys not looked up meanwhile drop their deltas."""
    rng = random.Random(9)
    engine = Engine(CHECKBOX)
    s = Scheduler(tmp_path, no_spark, flush_interval=3600)
    s.start()
    try:
        s.install(CHECKBOX)
        evicted = 0
        for step in range(1, 30):
            epoch = write(s, engine, random_epoch("checkbox", rng))
            if step % 3:
                assert answers(s, epoch) == engine.read("checkbox"), f"epoch {epoch}"
            with s.view_state.lock:
                graph = s.graph
                assert graph is not None
                readers = list(graph.graph.readers.values())
                assert all(r.partial for r in readers)
                if readers:
                    evicted += graph.graph.evict(1 << 40).keys
        assert evicted > 0
        assert answers(s, epoch) == engine.read("checkbox")
    finally:
        s.stop()
