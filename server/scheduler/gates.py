"""For tests only: gates that hold the apply at chosen moments in a real server process.

`POMOVIEW_TEST_APPLY_GATE=<folder>` arms two gates, each closed while its file exists:

- `<folder>/hold`: the apply waits before a step takes its batches, so that durable batches
  queue up (and the next step takes them all: a batched step);
- `<folder>/mid`: the apply waits inside a step, after its passes and before it is published,
  having first written `<folder>/reached` ("<first epoch> <last epoch> <batches>"), so that
  a test can kill the process in the middle of a batched step.

Unset (every real server), neither is checked: one attribute test per step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

from pomoview.server.types import LoggedBatch

GATE_ENV = "POMOVIEW_TEST_APPLY_GATE"
# How often a closed gate looks at its file again.
_POLL = 0.01


class ApplyGates:
    def __init__(self, stopping: threading.Event) -> None:
        folder = os.environ.get(GATE_ENV)
        self._folder = Path(folder) if folder else None
        self._stopping = stopping

    def before_take(self) -> None:
        if self._folder is not None:
            self._wait_while(self._folder / "hold")

    def mid_step(self, batches: Sequence[LoggedBatch]) -> None:
        if self._folder is None or not (self._folder / "mid").exists():
            return
        reached = self._folder / "reached"
        tmp = reached.with_suffix(".tmp")
        tmp.write_text(f"{batches[0].epoch} {batches[-1].epoch} {len(batches)}")
        tmp.replace(reached)  # whole or absent: the test reads it as soon as it appears
        self._wait_while(self._folder / "mid")

    def _wait_while(self, path: Path) -> None:
        while path.exists() and not self._stopping.wait(_POLL):
            pass
