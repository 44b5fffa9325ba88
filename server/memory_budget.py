"""When to evict: the server process's real memory against `--memory-budget`.

ReadySet decides *when* to evict from the allocator's counters, because its per-node size
estimates ran about 8x low; it decides *where* from the per-state sizes. So here: the trigger
is the process's resident set (RSS, from /proc/self/statm) grown past the budget since the
server started (`baseline`); what to free is counted in the states' own estimates
(dataflow/eviction.py), converted by a calibration ratio: RSS growth over estimated bytes,
measured whenever RSS reaches a new high (then the growth is fresh memory, not memory freed
by an eviction and reused, which RSS never gives back). Eviction brings the estimated state
to 80% of the budget in those units, so reads do not trigger it again at once.

Invariant: `ratio >= 1` (an estimate above real memory is not trusted to shrink the budget).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

_PAGE = os.sysconf("SC_PAGE_SIZE")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# The share of the budget the estimated state is brought down to by an eviction.
_TARGET = 0.8
# How often, at most, RSS is read (a read of /proc costs ~10 us; lookups come in thousands/s).
_INTERVAL = 0.05


def process_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


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
        self, budget: int, rss: Callable[[], int] = process_rss, interval: float = _INTERVAL
    ) -> None:
        self.budget = budget
        self._rss = rss
        self.baseline = rss()
        self._interval = interval
        self._next = 0.0
        self._peak = self.baseline
        self.ratio = 1.0
        self.last_rss = self.baseline
        self.evictions = 0  # eviction rounds run

    def to_free(self, estimated: Callable[[], int]) -> int:
        """Estimated bytes of partial state to evict now (0: none). `estimated` gives the
        states' estimate; it is asked only when RSS is over the budget."""
        now = time.monotonic()
        if now < self._next:
            return 0
        self._next = now + self._interval
        rss = self.last_rss = self._rss()
        growth = rss - self.baseline
        if growth <= self.budget and rss <= self._peak:
            return 0
        estimate = estimated()
        if rss > self._peak:
            self._peak = rss
            if estimate > 0:
                self.ratio = max(1.0, growth / estimate)
        if growth <= self.budget:
            return 0
        target = int(_TARGET * self.budget / self.ratio)
        return max(0, estimate - target)
