"""Fixtures of the server's tests: a real scheduler in process, and a tiny real file system
for tests of what the server does when the disk is full."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.scheduler.scheduler import Scheduler

TINY_FS_BYTES = 64 * 1024


@pytest.fixture
def scheduler(tmp_path: Path, spark: Any) -> Iterator[Scheduler]:
    """A real scheduler over a fresh data folder and the run's one Spark session, its flusher
    held off (a test flushes when it means to); a test file may define its own."""
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def fill(directory: Path) -> Path:
    """Fills the file system holding `directory` with one file, to the last byte it takes."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in (4096, 1):
            while True:
                try:
                    os.write(fd, b"\xaa" * chunk)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Callable[[Path], Path]]:
    """Mounts a 64 KiB tmpfs at a given folder, so that writes meet a real ENOSPC.

    Mounting needs root (or CAP_SYS_ADMIN); elsewhere the test is skipped, with the reason.
    """
    mounted: list[Path] = []

    def mount(where: Path) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        if shutil.which("mount") is None:
            pytest.skip("needs a tiny tmpfs, but there is no `mount` command")
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TINY_FS_BYTES}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"needs a tiny tmpfs, and mounting one is not permitted: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        # Lazy, so that a file a failed test left open does not keep the mount behind.
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)
