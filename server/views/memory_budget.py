"""When to evict: the partial state's size, in real bytes, against `--memory-budget`.

ReadySet decides *when* to evict from the allocator's counters, because its per-node size
estimates ran about 8x low; it decides *where* from the per-state sizes. Python has no cheap
counter of live bytes (tracemalloc costs a third of the throughput), and the process's RSS
is a poor trigger on its own: it holds thread stacks, the allocators' free lists and
Arrow's buffers, and never shrinks when state is freed, so evicting on RSS alone evicts
everything again and again while RSS stays where it is (measured: a 24 MiB budget evicted 46
times in 30 s and RSS still grew 150 MiB, of which tracemalloc found 10 MiB live).

So the states' own estimates (dataflow/eviction.py) are converted to real bytes by a ratio
measured against RSS: whenever RSS reaches a new high while the estimated state grew by at
least a MiB since the last high, the ratio moves halfway to (RSS growth / estimate growth)
over that step: the cost in real memory of a byte of estimated state, learnt while the state
grows. Eviction starts when estimate x ratio passes the budget and brings it to 80% of it.
RSS = the baseline at start + fixed overhead (threads, allocators, Arrow) + at most the
budget of state; bench/vote.py measures all three.

Invariant: 1 <= ratio <= 8 (an estimate is not trusted above real memory, nor more than
eight times below it).

RSS is read on a thread of its own (`run`, the scheduler's "memory" thread) every interval;
`to_free`, under the dataflow lock, uses the last sample, once. Reading /proc is a system
call, which gives up the interpreter lock: a thread that did so waited for the interpreter
lock to come back behind whichever thread had taken it, up to the switch interval (50 ms in
the server's process when the hit replica answers hits, scheduler/gil_policy.py). Under the
dataflow lock every thread waiting for it waited too, and on the apply's thread, even
outside the lock, the step waited. In bench/hits_under_load.py's busy phase at full scale (a
probe timing each check), the apply's check took 10-56 ms, where the estimate alone takes
about 1, whenever it read RSS, dozens of times in 100 s: each one a step that long.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import re
import threading
from collections.abc import Callable

_PAGE = os.sysconf("SC_PAGE_SIZE")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# The share of the budget the estimated state is brought down to by an eviction.
_TARGET = 0.8
# The estimated growth between two RSS highs that calibrates the ratio (smaller steps are
# noise: a fetch's buffers, a thread's stack).
_CALIBRATION_STEP = 1 << 20
_MAX_RATIO = 8.0
# How often, at most, RSS is read (a read of /proc costs ~10 us; lookups come in thousands/s).
_INTERVAL = 0.05


def process_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def give_back_memory() -> None:
    """Collects the cycles freed state left behind, then has the C allocator return its free
    pages to the OS (glibc's `malloc_trim`; elsewhere, only the collection). For an eviction
    asked for by name, whose caller wants RSS to fall: without it, freed state stays in the
    process's free lists (bench/recursive_lookup.py at scale 0.1: RSS 1,064 MiB after the
    lookups, 1,173 MiB a second after evicting every key). A collection holds the interpreter
    lock for as long as it takes, so the apply and the budget never call it."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    return trim if callable(trim) else None


def default_budget() -> int:
    """A quarter of the machine's memory."""
    return os.sysconf("SC_PHYS_PAGES") * _PAGE // 4


def parse_bytes(text: str) -> int:
    """`67108864`, `64M`, `64MiB`, `1.5G`: bytes (K, M, G, T are powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if match is None:
        raise ValueError(f"{text!r} is not a size in bytes (say 67108864, 64M or 1.5GiB)")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value <= 0:
        raise ValueError(f"a memory budget must be positive, not {text!r}")
    return value


def format_bytes(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


class MemoryBudget:
    def __init__(
        self,
        budget: int,
        rss: Callable[[], int] = process_rss,
        interval: float = _INTERVAL,
    ) -> None:
        self.budget = budget
        self._rss = rss
        self.baseline = rss()
        self._interval = interval
        self._peak = self.baseline
        self._peak_estimate = 0
        self.ratio = 1.0
        self.last_rss = self.baseline
        self._sampled: int | None = None  # read by `sample`, not yet used by `to_free`
        self.evictions = 0  # eviction rounds run

    def sample(self) -> None:
        """Reads RSS for the next `to_free` (never under the dataflow lock: see the module's
        docstring)."""
        self._sampled = self._rss()

    def run(self, stopping: threading.Event) -> None:
        """Samples RSS every interval until `stopping` is set (the memory thread)."""
        while not stopping.wait(self._interval):
            self.sample()

    def start(self, stopping: threading.Event) -> threading.Thread:
        """`run` on a thread of its own, the memory thread, started."""
        thread = threading.Thread(target=self.run, args=(stopping,), name="memory", daemon=True)
        thread.start()
        return thread

    def to_free(self, estimated: Callable[[], int]) -> int:
        """Estimated bytes of partial state to evict now (0: none), once per RSS sample
        (`sample`); `estimated` gives the states' estimate."""
        rss, self._sampled = self._sampled, None
        if rss is None:
            return 0
        self.last_rss = rss
        estimate = estimated()
        if rss > self._peak:
            grown = estimate - self._peak_estimate
            if grown >= _CALIBRATION_STEP:
                step = (rss - self._peak) / grown
                self.ratio = min(_MAX_RATIO, max(1.0, (self.ratio + step) / 2))
            self._peak, self._peak_estimate = rss, estimate
        if estimate * self.ratio <= self.budget:
            return 0
        return max(0, estimate - int(_TARGET * self.budget / self.ratio))
