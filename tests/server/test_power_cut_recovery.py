"""A second power cut, during the recovery from the first and the writes that follow it.

Recovery writes too: it truncates a torn tail of the log and fsyncs it, and removes a segment
that holds no whole record; then the restarted server appends new batches after what it
kept. A recovery that did those steps in the wrong order, or without their fsyncs, would pass
every single-cut test and still lose data at the next cut (a torn record resurrected in
the middle of the log, or a new acknowledged batch written behind garbage that the next
recovery stops at). This is the "cut during recovery" case of ALICE.

For each state a first cut of `arrow_sequence` may leave (test_power_cut.py), the state is
laid on a fresh `CrashFS` as durable, then the restart is recorded: the real `SourceStore`
and `WriteAheadLog.recover`, as `Scheduler._recover` does, then three new batches appended
and acknowledged. Every cut point of that recording is restarted from again, under every
variant, and checked with the same oracle (`check_restart`): the batches acknowledged before
the first cut and the new ones acknowledged before the second are all visible, whole, and
nothing else is.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pomoview.server.store.fs import LocalFS
from pomoview.server.store.source_store import SourceStore
from pomoview.server.types import LoggedBatch, SourceChange
from pomoview.server.wal.wal import WriteAheadLog

from .crash_fs import VARIANTS, CrashFS, Op, Tree, cut_points, cut_states, materialize
from .power_cut_workload import SCHEMA, SOURCE, Key, Run, _no_spark, check_restart
from .test_power_cut import _FAST, Lie, arrow_sequence

NEW_WRITER = 9  # the new batches are (9, 0), (9, 1), (9, 2)


def lay(fs: CrashFS, tree: Tree) -> Path:
    """Writes `tree` into a folder of `fs` through the layer, every file and folder fsynced
    (the folder's name too): the state the disk holds when the power comes back. Returns the
    folder."""

    def durably(tree: Tree, where: Path) -> None:
        fs.makedirs(where)
        for name, value in sorted(tree.items()):
            if isinstance(value, bytes):
                f = fs.create(where / name)
                f.write(value)
                f.fsync()
                f.close()
            else:
                durably(value, where / name)
        fs.fsync_path(where)

    where = Path(fs.root) / "restart"
    durably(tree, where)
    fs.fsync_path(fs.root)
    return where


def restart_and_write(fs: CrashFS, data: Path, run: Run) -> int:
    """What a restarted server does on `data`: recover the store and the log, then append
    three batches, each acknowledged (noted) once durable. Returns how many file operations
    the recovery itself recorded."""
    before = len(fs.trace)
    # As `Scheduler.__init__` and `_recover` do, then `install` (its source registered
    # before any write to it).
    fs.makedirs_durably(data)
    store = SourceStore(LocalFS(data / "store", fs), _no_spark)
    wal = WriteAheadLog(data / "wal", files=fs)
    wal.recover(store.schemas())
    recovery_ops = len(fs.trace) - before
    store.ensure_source(SOURCE, SCHEMA)
    epoch = max(wal.last_epoch, store.version)
    try:
        for i in range(3):
            epoch += 1
            rows = tuple((NEW_WRITER, i, j, f"after the first cut {i}") for j in range(1 + i))
            run.submitted[(NEW_WRITER, i)] = frozenset(rows)
            wal.append(LoggedBatch(epoch, {SOURCE: SourceChange(rows, ())}))
            fs.note(("ack", (NEW_WRITER, i)))
    finally:
        wal.close()
    return recovery_ops


@dataclass
class SecondCuts:
    first_states: int = 0  # distinct states a first cut may leave
    recovering_writes: int = 0  # of which the recovery writes to the disk
    second_cut_points: int = 0
    second_states: int = 0
    failures: list[str] = field(default_factory=list)


def second_cuts(
    first_tree: Tree, first_acked: set[Key], run: Run, scratch: Path, lie: Lie | None, into: SecondCuts
) -> None:
    """Lays `first_tree`, records the restart on it, and restarts from every state a cut of
    that recording may leave."""
    fs = CrashFS(scratch / "disk", lie=lie)
    where = lay(fs, first_tree)
    laid = len(fs.trace)
    again = Run(submitted=dict(run.submitted))
    restart_and_write(fs, where / "data", again)
    into.second_cut_points += sum(1 for p in cut_points(fs.trace) if p >= laid)
    for state in cut_states(fs.trace, list(VARIANTS)):
        if state.cut < laid:
            continue
        into.second_states += 1
        materialize(state.tree, scratch / "second")
        acked = first_acked | {note[1] for note in state.notes if note[0] == "ack"}
        problem = check_restart(scratch / "second" / "restart" / "data", acked, again)
        if problem is not None:
            before = fs.describe(fs.trace[state.cut]) if state.cut < len(fs.trace) else "the end"
            into.failures.append(
                f"second cut {state.cut - laid}/{len(fs.trace) - laid} (before: {before}), "
                f"{state.variant}: {problem}"
            )


def sweep_second_cuts(where: Path, lie: Lie | None = None, stop_at_first: bool = False) -> SecondCuts:
    """Every distinct state a first cut of the no-Spark sequence may leave; for each whose
    recovery writes to the disk, and every fifth of the others, every second cut."""
    result = SecondCuts()
    with tempfile.TemporaryDirectory(dir=_FAST if _FAST.is_dir() else where) as tmp:
        scratch = Path(tmp)
        fs = CrashFS(scratch / "first", fsync_delay=0.001)
        run = arrow_sequence()(fs, Path(fs.root) / "data")
        for n, state in enumerate(cut_states(fs.trace, list(VARIANTS))):
            result.first_states += 1
            acked = {note[1] for note in state.notes if note[0] == "ack"}
            folder = scratch / f"s{n}"
            probe = CrashFS(folder / "probe")
            if restart_and_write(probe, lay(probe, state.tree) / "data", Run(dict(run.submitted))):
                result.recovering_writes += 1
            elif n % 5:
                continue
            second_cuts(state.tree, acked, run, folder, lie, result)
            if result.failures and stop_at_first:
                break
    return result


def test_a_second_cut_during_recovery_and_the_writes_after_it_loses_nothing(tmp_path: Path) -> None:
    started = time.perf_counter()
    result = sweep_second_cuts(tmp_path)
    print(
        f"\nfirst-cut states: {result.first_states} ({result.recovering_writes} whose recovery "
        f"writes), second cut points tried: {result.second_cut_points}, states restarted from: "
        f"{result.second_states}, {time.perf_counter() - started:.1f} s"
    )
    assert result.recovering_writes > 0, result
    assert result.second_cut_points > 100, result
    assert not result.failures, "\n".join(result.failures[:10])


def _truncation_fsync(path: str, is_dir: bool, trace: Sequence[Op]) -> bool:
    """Recovery's fsync of the log segment whose torn tail it just truncated."""
    return not is_dir and "/wal/wal-" in path and bool(trace) and trace[-1][0] == "truncate"


def test_a_recovery_that_does_not_fsync_its_truncation_is_caught(tmp_path: Path) -> None:
    """Without that fsync, the new batches appended after the truncation can sit behind the
    torn bytes after the next cut, where the next recovery stops reading."""
    result = sweep_second_cuts(tmp_path, lie=_truncation_fsync, stop_at_first=True)
    assert result.failures, f"the missing fsync went unnoticed: {result}"
    print(f"\ncaught: {result.failures[0]}")
