"""The server's garbage collector: what is alive when the server is ready is frozen, full
collections are made rarer, and every collection's pause is measured.

Why: CPython's full collections (generation 2) walk every tracked object and stop every
thread while they do. Under the busy load of bench/hits_under_load.py (scale 0.1; each
collection timed through gc.callbacks), full collections came about every 5 s (the flush
interval) and took 100-700 ms (p50 306 ms), collecting a few hundred objects each.

- `gc.freeze()` at start moves what lives as long as the server (modules, functions,
  classes, the gRPC and proto machinery: 77,218 objects in `./scripts/serve`, the Spark
  session still booting; 117,000 once it is up, as a probe counted) to the permanent
  generation, which no collection walks. Alone, it left 28 full collections in the busy phase at 156 ms
  on average (4.4 s in all): what remains walked is what the server made since, its warm
  state and the log tail.
- `FULL_COLLECTION_EVERY` then makes them a tenth as frequent: 4-5 in the busy phase, 137-248
  ms on average, 0.7-1.1 s in all. Cyclic garbage waits longer for its collection; the
  server makes little (a few hundred objects a collection).

Frozen objects are never collected as cycles. Nothing frozen at start is garbage later: no
dataflow graph exists yet (one is built at a view's first lookup), and what the start made
for itself alone (parsed settings, the CLI's objects) is freed by its counts.

`Refreeze` then freezes again after every full collection, so that the next walks only
what was made since (the warm state and the log tail grow under a write load: at full
scale a full collection of bench/hits_under_load.py's busy phase took 211 ms, and each
held every thread, the apply's included). Right after a full collection everything still
tracked is alive, but some of it may later die in a cycle (a dataflow graph replaced at an
install, a closed subscription), which a frozen object never gets collected for: so a full
collection is now and then preceded by `gc.unfreeze()` and walks everything (a thaw), which
bounds what such cycles hold to what dies between two thaws. A replaced graph is thawed at
once (`thaw`, the view state's `graph_dropped`): its states may be large.

How often: the first thaw comes `THAW_EVERY` full collections after the start; then each
thaw that frees fewer than `THAW_PAYS` objects doubles the interval to the next (up to
`THAW_EVERY_MAX`), and one that frees more brings it back to `THAW_EVERY`. A thaw walks
the whole heap (153 ms at full scale, against 8-28 ms for the refrozen collections beside
it) and under a steady load finds little to free, so its pause is paid rarely; a server
that makes cyclic garbage in quantity is thawed as often as before.

Measured, `bench/hits_under_load.py --scale 1 --windows 2 --server-arg=--hit-replica`, the
full collections of the busy phase (100 s; `pomoview_gc_pause_seconds` read every 3 s), one
run each: with the refreeze 15 collections holding the threads 0.42 s in all, 8-28 ms each
but the thaw's 153 ms; without it 14 collections in 1.40 s, 41-196 ms each, growing with
the heap.

The pauses are measured through `gc.callbacks` (`pomoview_gc_pause_seconds`), beside the
dataflow lock's holds.
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
# Full collections from the start to the first thaw, and between thaws that pay.
THAW_EVERY = 8
# The longest interval between thaws, in full collections.
THAW_EVERY_MAX = 64
# A thaw that frees fewer objects than this doubles the interval to the next.
THAW_PAYS = 10_000


def freeze_at_start() -> int:
    """Collects once, then freezes everything alive (call it when the server is ready, before
    any lookup), and makes full collections rarer; returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
    frozen = gc.get_freeze_count()
    log.info("garbage collector: %d objects alive at start frozen (full collections skip them)", frozen)
    REFREEZE.start()
    return frozen


class CollectorCallback:
    """A `gc.callbacks` entry, `_callback`, registered once from `start` to `stop`. The
    callbacks run in whichever thread the collection stopped, with the interpreter lock
    held: a collection's start and end are never interleaved with another's."""

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        raise NotImplementedError


class Refreeze(CollectorCallback):
    """After each full collection, freezes what survived it; now and then unfreezes
    everything instead, so that the next full collection walks it all (a thaw; see the
    module's docstring for how often). The callback runs as the collection ends, with the
    generations' lists whole, so the freeze takes exactly the collection's survivors and
    what was older."""

    def __init__(self) -> None:
        self.full = 0  # full collections seen
        self.interval = THAW_EVERY  # full collections from one thaw to the next
        self.since_thaw = 0  # full collections since the last thaw (or the start)
        self.thawing = False  # unfrozen: the next full collection is a thaw
        self.last_freed = 0  # objects the last thaw freed

    def thaw(self) -> None:
        """Unfreezes everything now: a dataflow graph was replaced, and what it held (its
        states, in cycles of nodes) is freed at the next full collection, as it was before
        any refreeze."""
        gc.unfreeze()
        self.thawing = True

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info["generation"] != 2:
            return
        self.full += 1
        if self.thawing:
            self.thawing, self.since_thaw = False, 0
            self.last_freed = int(info["collected"])
            paid = self.last_freed >= THAW_PAYS
            self.interval = THAW_EVERY if paid else min(2 * self.interval, THAW_EVERY_MAX)
        else:
            self.since_thaw += 1
        if self.since_thaw >= self.interval - 1:
            self.thaw()
        else:
            gc.freeze()


class GcPauses(CollectorCallback):
    """Tells `observe(generation, seconds)` the pause of every collection from `start` to
    `stop`."""

    def __init__(self, observe: Callable[[int, float], None]) -> None:
        self._observe = observe
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._observe(int(info["generation"]), time.perf_counter() - self._started)


# The process's one (the collector is the process's): freeze_at_start starts it.
REFREEZE = Refreeze()
