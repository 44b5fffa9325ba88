"""A full disk under the Parquet store (a 64 KiB tmpfs; the log is elsewhere): flushes and
compactions fail with the store at its last version, its manifest untouched and the log
untrimmed, lookups and writes go on, and the flusher succeeds once space is back."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.store import fs as store_fs
from pomoview.server.store.manifest import StoreWriteError

from .conftest import fill

PROGRAM = """
source a(x: int, y: string).
source b(x: int).
view v(x).
v(x: X, n: N) :- b(x: X), N := count : a(x: X).
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def applied(s: Scheduler, epoch: int) -> int:
    """Waits until `epoch` is applied (so that a flush takes it); returns it."""
    s.lookup("v", [row(x=0)], min_epoch=epoch)
    return epoch


def counts(s: Scheduler, xs: range, epoch: int) -> list[Any]:
    return s.lookup("v", [row(x=x) for x in xs], min_epoch=epoch)[0]


def test_a_full_store_disk_fails_flushes_and_compactions_until_space_is_back(
    tmp_path: Path, spark: Any, tiny_fs: Callable[[Path], Path], caplog: pytest.LogCaptureFixture
) -> None:
    store = tiny_fs(tmp_path / "store")
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600, store_dir=store)
    s.compact_min_parts = 2
    s.start()
    try:
        s.install(PROGRAM)
        batch = [("a", [row(x=x, y="p") for x in range(3)], []), ("b", [row(x=x) for x in range(4)], [])]
        first = applied(s, s.write(batch))
        assert counts(s, range(1), first) == [[{"x": 0, "n": 1}]]
        assert s.flush() == first
        second = applied(s, s.write([("a", [row(x=x, y="q") for x in range(2)], [])]))
        assert s.flush() == second  # two parts: a compaction candidate

        before = files(store)
        filler = fill(store)
        third = applied(s, s.write([("a", [row(x=x, y="r" * 50) for x in range(3)], [])]))
        with pytest.raises(StoreWriteError) as failed:
            s.flush()
        assert failed.value.disk_full, failed.value
        assert "No space left on device" in str(failed.value)
        assert f"the flush of epochs {third}..{third}" in str(failed.value)
        with pytest.raises(StoreWriteError, match="compaction of 'a'.*No space left on device"):
            s.store.compact("a")
        # The store is as it was, with nothing left behind; the log keeps the batch.
        assert s.store.version == second
        assert files(store) == {**before, "filler": filler.read_bytes()}
        assert [b.epoch for b in s.tail.batches] == [third]
        # Lookups answer (cold keys through Spark, over the store and the log), writes commit.
        expected = [[{"x": x, "n": 3 - (x == 2)}] for x in range(3)] + [[{"x": 3, "n": 0}]]
        assert counts(s, range(4), third) == expected
        fourth = s.write([("a", [row(x=3, y="s")], [])])

        # The flusher keeps trying, one line each time, and succeeds once space is back.
        s.flush_interval = 0.2
        caplog.set_level(logging.WARNING, "pomoview.scheduler")
        flusher = threading.Thread(target=s.flusher.flush_loop, daemon=True)  # the first waits an hour
        s.threads.append(flusher)
        flusher.start()
        end = time.monotonic() + 120
        while sum("a flush failed" in r.getMessage() for r in caplog.records) < 2:
            assert time.monotonic() < end, "the flusher did not retry"
            time.sleep(0.1)
        failure = next(r for r in caplog.records if "a flush failed" in r.getMessage())
        assert "No space left on device" in failure.getMessage() and not failure.exc_info
        assert f"the store stays at version {second}" in failure.getMessage()
        assert s.store.version == second
        filler.unlink()
        while s.store.version < fourth or len(s.store._snapshots.current().sources["a"].parts) > 1:
            assert time.monotonic() < end, "no flush and compaction once space was back"
            time.sleep(0.1)
        assert s.tail.batches == []
        expected = [[{"x": x, "n": 3 - (x == 2)}] for x in range(3)] + [[{"x": 3, "n": 1}]]
        assert counts(s, range(4), fourth) == expected
    finally:
        s.stop()
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600, store_dir=store)
    s.start()
    try:  # the manifest is whole: a restart reads everything back
        assert s.store.version == fourth and s.tail.batches == []
        assert counts(s, range(4), fourth) == expected
    finally:
        s.stop()


def test_an_injected_enospc_leaves_the_store_as_it_was(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same failures injected, for machines that cannot mount a tmpfs: one after Spark
    wrote the part (at its fsync), one at the manifest's."""
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    store = tmp_path / "data" / "store"
    try:
        s.install(PROGRAM)
        first = applied(s, s.write([("a", [row(x=1, y="p")], []), ("b", [row(x=1)], [])]))
        assert s.flush() == first
        before = files(store)
        second = applied(s, s.write([("a", [row(x=1, y="q")], [])]))

        def full(*args: Any) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        for where in ("sync_tree", "manifest"):
            with monkeypatch.context() as patch:
                if where == "sync_tree":
                    patch.setattr(store_fs.LocalFS, "sync_tree", full)
                else:
                    patch.setattr(store_fs.os, "fsync", full)
                with pytest.raises(StoreWriteError) as failed:
                    s.flush()
            assert failed.value.disk_full and "No space left on device" in str(failed.value)
            assert s.store.version == first
            assert files(store) == before, where  # no part, no temporary manifest left
            assert [b.epoch for b in s.tail.batches] == [second]
        assert s.flush() == second
        assert counts(s, range(1, 2), second) == [[{"x": 1, "n": 2}]]
    finally:
        s.stop()
