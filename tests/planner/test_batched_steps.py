"""Batched apply equals per-epoch apply (server/scheduler/applier.py): a run of write batches
applied as one step, with each source's operations consolidated (`consolidated`), leaves
every view as the same batches applied one epoch at a time.

Random programs (random_programs.py) and random groupings of random batches into steps.
The system under test is a partial graph with lookups between the steps (and a full graph,
read whole), both stepped once per group; the reference is a full graph stepped once per
batch, as the server did before it batched."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from partial_model import Model  # noqa: E402
from random_programs import apply as apply_to_store  # noqa: E402
from random_programs import generate, random_batch  # noqa: E402

from pomoview.dataflow.zset import ZSet  # noqa: E402
from pomoview.planner.compile import ProgramGraph, compile_program  # noqa: E402
from pomoview.server.scheduler.applier import consolidated  # noqa: E402
from pomoview.server.types import LoggedBatch, SourceChange  # noqa: E402


def logged(epoch: int, batch: dict[str, dict[tuple, int]]) -> LoggedBatch:
    changes = {}
    for s, ops in batch.items():
        changes[s] = SourceChange(
            tuple(r for r, op in ops.items() if op > 0), tuple(r for r, op in ops.items() if op < 0)
        )
    return LoggedBatch(epoch, changes)


def per_epoch_ops(batch: dict[str, dict[tuple, int]]) -> dict[str, ZSet[tuple]]:
    return {s: ZSet.of_weights({r: 1 if op > 0 else -1 for r, op in ops.items()}) for s, ops in batch.items()}


def run_case(seed: int, batches: int = 24) -> int:
    """Returns the number of reads compared."""
    rng = random.Random(seed)
    source = generate(rng)
    program = compile_program(source.pomo())
    model = Model(program)  # the batched system: a partial graph, and a full one read whole
    reference = ProgramGraph(program, partial=False)  # one step per batch
    store: dict[str, set[tuple]] = {s: set() for s in source.sources}
    derived = sorted(n for n, r in program.relations.items() if r.kind == "derived")
    epoch, compared = 0, 0
    while epoch < batches:
        group = []
        for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
            batch = random_batch(rng, source, store)
            apply_to_store(store, batch)
            epoch += 1
            group.append(logged(epoch, batch))
            reference.step(per_epoch_ops(batch))
        for lb in group:  # the model's sources, batch by batch, as the log holds them
            for s, change in lb.changes.items():
                model.store[s].update(change.inserts)
                model.store[s].difference_update(change.deletes)
        step = consolidated(group)
        model.partial.step(step)
        model.full.step(step)
        model.check_graph()

        def fetch_now(src: str, names: tuple[str, ...], keys: list, filters: tuple) -> list:
            return model.now(src, names, keys, filters)

        for view in derived:
            want = reference.lookup(view, (), [()], fetch_now)[0]
            assert set(model.full.lookup(view, (), [()], model.now)[0]) == set(want), (seed, epoch, view)
            attrs = program.relations[view].attributes
            if not attrs or not want and rng.random() < 0.5:
                continue
            key = (attrs[0],)
            values = sorted({(row[0],) for row in want}, key=repr)[:2] or [(0,)]
            pending = model.begin(view, key, values)
            for _ in range(200):
                rows = model.attempt(pending)
                if rows is not None:
                    break
            else:
                raise AssertionError(f"seed {seed}: the lookup of {view} did not settle")
            expected = [{r for r in want if (r[0],) == v} for v in values]
            assert [set(r) for r in rows] == expected, (seed, epoch, view, values)
            compared += 1
    return compared


@pytest.mark.parametrize("block", range(2))
def test_batched_steps_equal_per_epoch_steps(block: int) -> None:
    compared = sum(run_case(seed) for seed in range(block * 8, block * 8 + 8))
    assert compared > 16, compared


@pytest.mark.slow
def test_batched_steps_sweep() -> None:
    compared = sum(run_case(seed, batches=60) for seed in range(1000, 1300))
    assert compared > 1000, compared
