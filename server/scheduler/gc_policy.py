"""The server's garbage collector: what is alive when the server is ready is frozen, and every
collection's pause is measured.

Why freeze: CPython's full collections (generation 2) walk every tracked object, and stop
every thread while they do. At start the server holds about 117,000 of them that live as long
as it does (modules, functions, classes, the gRPC and proto machinery). Under a write load,
full collections came every 5 s or so (the log tail's batches age into generation 2 between
flushes), and each walked all of them: 100-700 ms (p50 306 ms) with nothing to collect, the
apply, the lookups and the flusher stopped meanwhile; they were most steps over 250 ms, and
so the apply lag's p99 (bench/hits_under_load.py --scale 0.1, gc.callbacks timing each
collection). `gc.freeze()` moves them to the permanent generation, which no collection
walks: in the same run full collections came more often (the generation they are counted
against is small) but took 7-137 ms.

What is frozen is never collected as a cycle. Nothing frozen here is garbage later: no
dataflow graph exists yet (a graph is built at a view's first lookup), and what the start
made for itself alone (parsed settings, the CLI's objects) is acyclic, freed by its counts.

The pauses are measured through `gc.callbacks` (`pomoview_gc_pause_seconds`), so that an
operator sees them beside the dataflow lock's holds.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("pomoview.gc")


# Generation-1 collections between full ones (CPython's default: 10).
FULL_COLLECTION_EVERY = 100


def freeze_at_start() -> int:
    """Collects once, then freezes everything alive (call it when the server is ready, before
    any lookup), and makes full collections rarer; returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
    frozen = gc.get_freeze_count()
    log.info("garbage collector: %d objects alive at start frozen (full collections skip them)", frozen)
    return frozen


class GcPauses:
    """Tells `observe(generation, seconds)` the pause of every collection from `start` to
    `stop`. The callbacks run in whichever thread the collection stopped, with the
    interpreter lock held: a collection's start and end are never interleaved with another's."""

    def __init__(self, observe: Callable[[int, float], None]) -> None:
        self._observe = observe
        self._started = 0.0

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._observe(int(info["generation"]), time.perf_counter() - self._started)
