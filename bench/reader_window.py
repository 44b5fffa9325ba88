"""One measured window of closed-loop readers, shared by the read benchmarks
(hits_under_load.py, lookup_at_rest.py): a thread per reader, each ready (connected, one call
made) before the clock starts, sending calls back to back until the window ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

# Calls per reader and window at most: every loop is bounded in count too.
MAX_CALLS = 10_000_000


class Caller(Protocol):
    def wait_ready(self, timeout: float) -> None: ...
    def call(self, i: int) -> None: ...
    def close(self) -> None: ...


@dataclass
class Window:
    latencies: list[float]  # seconds per call, every reader's
    errors: list[str]
    wall: float  # seconds from the start to the last reader's end; 0.0 if a reader failed to start
    metered: tuple[float, ...] = field(default=())  # `meter`'s end minus its start


def run_window(
    readers: Sequence[Caller], seconds: float, meter: Callable[[], tuple[float, ...]] | None = None
) -> Window:
    """Runs `readers` for `seconds` and closes them. `meter` (CPU clocks, say) is read as the
    window starts and as it ends."""
    latencies: list[list[float]] = [[] for _ in readers]
    errors: list[str] = []
    barrier = threading.Barrier(len(readers) + 1, timeout=120.0)
    deadline = [time.perf_counter() + 120.0]  # until the barrier passes

    def run(n: int) -> None:
        reader, out = readers[n], latencies[n]
        try:
            reader.wait_ready(60.0)
            reader.call(0)
            barrier.wait()
            clock = time.perf_counter
            for i in range(1, MAX_CALLS):
                started = clock()
                if started >= deadline[0]:
                    break
                reader.call(i)
                out.append(clock() - started)
        except Exception as err:  # noqa: BLE001 (the caller reports them)
            errors.append(repr(err))
            barrier.abort()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(len(readers))]
    for t in threads:
        t.start()
    metered: tuple[float, ...] = ()
    try:
        barrier.wait()
        before = meter() if meter else ()
        started = time.perf_counter()
        deadline[0] = started + seconds
        for t in threads:
            t.join(timeout=seconds + 120.0)
        wall = time.perf_counter() - started
        if meter:
            metered = tuple(b - a for a, b in zip(before, meter(), strict=True))
    except threading.BrokenBarrierError:
        wall = 0.0
    finally:
        for r in readers:
            r.close()
    return Window([x for out in latencies for x in out], errors, wall, metered)
