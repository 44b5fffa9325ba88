"""Power cuts, not just SIGKILL: restart after every cut point of a write sequence (concurrent
writers, flushes, a compaction) and find every acknowledged batch, and no half batch.

SIGKILL keeps the page cache, so it cannot catch a missing fsync. These tests run the real
`WriteAheadLog` and `LocalFS` on `CrashFS` (crash_fs.py: its module docstring is the model of
what survives a cut), replay the recorded trace to every cut point, write what a cut there
may leave into a folder, and recover the real log and store from it
(power_cut_workload.py, which also states the oracle).

Without Spark: the log and the manifest protocol (`ArrowStore`), every cut point under every
`VARIANTS` state, and a proof per fsync that leaving it out is caught. With Spark: the real
`Scheduler` writing, flushing and compacting. The randomized sweeps are marked slow.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from .crash_fs import VARIANTS, Choice, CrashFS, Op, RandomChoice, cut_points, cut_states, materialize
from .power_cut_workload import ArrowStore, Run, check_restart, run_scheduler_sequence, run_sequence


@dataclass
class Sweep:
    cut_points: int
    states: int
    run: Run
    failures: list[str] = field(default_factory=list)
    by_variant: Counter[str] = field(default_factory=Counter)  # distinct states per variant


Workload = Callable[[CrashFS, Path], Run]


def arrow_sequence(writers: int = 3, per_writer: int = 6, flushes: int = 2) -> Workload:
    """The sequence on a log and an `ArrowStore` of its own: no Spark."""

    def run(fs: CrashFS, data: Path) -> Run:
        done = run_sequence(fs, data, ArrowStore, writers=writers, per_writer=per_writer, flushes=flushes)
        assert done.flushes == flushes, done
        return done

    return run


def sweep(
    where: Path,
    sequence: Workload,
    *,
    choices: Callable[[], list[Choice]] = lambda: list(VARIANTS),
    lie: Lie | None = None,
    stop_at_first: bool = False,
    fsync_delay: float = 0.001,
) -> Sweep:
    """Run the sequence once on a `CrashFS`, then restart from every state of every cut point.

    `fsync_delay` is how long each fsync takes: the longer, the more writers share a group.
    """
    with tempfile.TemporaryDirectory(dir=_FAST if _FAST.is_dir() else where) as scratch:
        fs = CrashFS(Path(scratch) / "disk", fsync_delay=fsync_delay, lie=lie)
        run = sequence(fs, Path(fs.root) / "data")
        assert run.flushes >= 1 and run.compactions == 1, run
        return _restarts(fs, run, Path(scratch) / "restart", choices, stop_at_first)


# Hundreds of folders are written and deleted per sweep: a tmpfs does it 100 times faster.
_FAST = Path("/dev/shm")


def _restarts(
    fs: CrashFS, run: Run, restart: Path, choices: Callable[[], list[Choice]], stop_at_first: bool
) -> Sweep:
    result = Sweep(cut_points=len(cut_points(fs.trace)), states=0, run=run)
    for state in cut_states(fs.trace, choices()):
        result.states += 1
        result.by_variant[state.variant] += 1
        materialize(state.tree, restart)
        acked = {note[1] for note in state.notes if note[0] == "ack"}
        problem = check_restart(restart / "data", acked, run)
        if problem is not None:
            before = fs.describe(fs.trace[state.cut]) if state.cut < len(fs.trace) else "the end"
            result.failures.append(
                f"cut {state.cut}/{len(fs.trace)} (before: {before}), {state.variant}: {problem}"
            )
            if stop_at_first:
                break
    return result


def test_every_cut_point_of_the_log_and_the_manifest_recovers(tmp_path: Path) -> None:
    started = time.perf_counter()
    result = sweep(tmp_path, arrow_sequence())
    print(
        f"\ncut points tried: {result.cut_points}, states restarted from: {result.states} "
        f"{dict(result.by_variant)}, batches: {len(result.run.submitted)}, "
        f"{time.perf_counter() - started:.1f} s"
    )
    assert result.cut_points > 50  # the sequence did reach the disk through the layer
    # Writes torn at both sector sizes were among the states (each counted where it differs
    # from every state before it; which tears differ depends on where the groups fell).
    for sector in (512, 4096):
        assert any(result.by_variant[f"torn {how} {sector}"] for how in ("first", "last", "hole"))
    assert not result.failures, "\n".join(result.failures[:10])


Lie = Callable[[str, bool, Sequence[Op]], bool]


def _after_publication(path: str, is_dir: bool, trace: Sequence[Op]) -> bool:
    """The store folder's fsync right after a manifest replaced an earlier one."""
    renames = [op for op in trace if op[0] == "move" and op[3] == "manifest.json"]
    return is_dir and path.endswith("/store") and len(renames) > 1 and trace[-1] is renames[-1]


# Each fsync of the protocol, left out (the layer makes it do nothing). Which paths it meets:
BREAKS: dict[str, Lie] = {
    # A group commit acknowledged before its records are on disk.
    "log file fsync": lambda path, is_dir, _: not is_dir and "/wal/wal-" in path,
    # A new segment's name not durable: its acknowledged records vanish with it.
    "log folder fsync": lambda path, is_dir, _: is_dir and path.endswith("/wal"),
    # The manifest's data not durable before the rename that publishes it.
    "manifest file fsync": lambda path, is_dir, _: not is_dir and "manifest.json" in path,
    # A flush's manifest rename not durable before the log is trimmed behind it.
    "store folder fsync after a manifest rename": _after_publication,
    # The part's Parquet data not durable before the manifest lists it (`sync_tree`).
    "part file fsync": lambda path, is_dir, _: not is_dir and path.endswith(".parquet"),
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_a_missing_fsync_is_caught(tmp_path: Path, broken: str) -> None:
    result = sweep(tmp_path, arrow_sequence(), lie=BREAKS[broken], stop_at_first=True)
    assert result.failures, f"leaving out the {broken} went unnoticed in {result.states} states"
    print(f"\n{broken} left out, caught after {result.states} states: {result.failures[0]}")


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**32 - 1),
    writers=st.integers(1, 6),
    per_writer=st.integers(3, 15),
    fsync_ms=st.sampled_from([0, 1, 3]),
    flushes=st.sampled_from([1, 2]),
)
def test_random_cuts_of_random_sequences_recover(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    writers: int,
    per_writer: int,
    fsync_ms: int,
    flushes: int,
) -> None:
    """Other interleavings, lengths and group sizes, and at each cut point 20 random choices of
    how much of each folder's changes survive and how each file is torn."""
    rng = random.Random(seed)
    result = sweep(
        tmp_path_factory.mktemp("random"),
        arrow_sequence(writers, per_writer, flushes),
        choices=lambda: [*VARIANTS, *(RandomChoice(rng) for _ in range(20))],
        fsync_delay=fsync_ms / 1000,
    )
    print(
        f"\nseed {seed}, {writers} writers x {per_writer} batches, fsync {fsync_ms} ms, "
        f"{flushes} flushes: "
        f"cut points tried: {result.cut_points}, states: {result.states}"
    )
    assert not result.failures, "\n".join(result.failures[:10])


def scheduler_sequence(spark: SparkSession, writers: int = 3, per_writer: int = 6) -> Workload:
    def run(fs: CrashFS, data: Path) -> Run:
        return run_scheduler_sequence(fs, data, spark, writers=writers, per_writer=per_writer)

    return run


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_every_cut_point_of_the_scheduler_with_spark(tmp_path: Path, spark: SparkSession) -> None:
    """The real `Scheduler` on the layer: its write path, its flusher (one flush, then a
    compaction, writes going on during each) and the real `SourceStore`, Spark writing the
    Parquet files (outside the layer; they enter the model when the store lists them). Every
    cut point, under the durable-only, as-seen and names-without-data states (the torn ones
    too in the slow sweep)."""
    started = time.perf_counter()
    result = sweep(tmp_path, scheduler_sequence(spark), choices=lambda: list(VARIANTS[:3]))
    print(
        f"\ncut points tried: {result.cut_points}, states restarted from: {result.states}, "
        f"batches: {len(result.run.submitted)}, {time.perf_counter() - started:.1f} s"
    )
    assert result.cut_points > 100
    assert not result.failures, "\n".join(result.failures[:10])


@pytest.mark.slow
def test_random_cuts_with_spark_recover(tmp_path: Path, spark: SparkSession) -> None:
    rng = random.Random(13)
    result = sweep(
        tmp_path,
        scheduler_sequence(spark, writers=4, per_writer=8),
        choices=lambda: [*VARIANTS, *(RandomChoice(rng) for _ in range(10))],
    )
    print(f"\ncut points tried: {result.cut_points}, states: {result.states}")
    assert not result.failures, "\n".join(result.failures[:10])
