"""When the server evicts (memory_budget.py): sizes as the flag takes them, and the decision
from a resident-set series (given here as a list, in place of /proc) against the budget, with
the calibration of estimated bytes to real ones and no spiral once memory is reused."""

from __future__ import annotations

import gc
import mmap
import threading

import pytest

from pomoview.server.views.memory_budget import MemoryBudget, give_back_memory, parse_bytes, process_rss

MIB = 1 << 20


@pytest.mark.parametrize(
    ("text", "value"),
    [("67108864", 64 * MIB), ("64M", 64 * MIB), ("64MiB", 64 * MIB), ("64mb", 64 * MIB),
     ("1.5G", 3 << 29), ("512k", 512 << 10), (" 2 GiB ", 2 << 30)],
)
def test_sizes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "lots", "-1", "0", "64X", "1e9"])
def test_a_size_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="size in bytes|positive"):
        parse_bytes(text)


def test_process_rss_is_this_process() -> None:
    # A fresh anonymous mapping: a bytearray may come from memory the allocator already holds
    # resident after earlier tests (seen once: RSS unchanged to the byte in a full-suite run).
    block = mmap.mmap(-1, 64 * MIB)
    try:
        before = process_rss()
        for offset in range(0, 64 * MIB, 4096):
            block[offset] = 1  # touch every page
        assert process_rss() - before > 48 * MIB
    finally:
        block.close()


def sampled(budget: MemoryBudget) -> MemoryBudget:
    """`budget` after its RSS was read (outside the dataflow lock, in the server)."""
    budget.sample()
    return budget


def test_rss_is_read_by_sample_and_never_by_to_free() -> None:
    """The read of /proc is a system call, which the apply and the dataflow lock's holders
    must not make (memory_budget.py): `to_free` uses the last sample, once, and reads
    nothing itself."""
    reads: list[int] = []

    def rss() -> int:
        reads.append(1)
        return (100 + 100 * len(reads)) * MIB

    budget = MemoryBudget(64 * MIB, rss=rss)
    assert len(reads) == 1  # the baseline
    budget.ratio = 2.0
    assert budget.to_free(lambda: 40 * MIB) == 0, "evicted without a sample"
    assert len(reads) == 1
    budget.sample()
    assert len(reads) == 2
    assert budget.to_free(lambda: 40 * MIB) > 0  # 80 MiB real: over
    assert budget.last_rss == 300 * MIB
    assert budget.to_free(lambda: 40 * MIB) == 0, "one sample used twice"
    assert len(reads) == 2


def test_the_memory_thread_samples_until_stopped() -> None:
    reads: list[int] = []
    third = threading.Event()

    def rss() -> int:
        reads.append(1)
        if len(reads) == 4:  # the baseline and three samples
            third.set()
        return 100 * MIB

    budget = MemoryBudget(64 * MIB, rss=rss, interval=0.001)
    stopping = threading.Event()
    thread = budget.start(stopping)
    assert thread.name == "memory" and thread.daemon
    assert third.wait(10)
    stopping.set()
    thread.join(10)
    assert not thread.is_alive()
    assert budget.to_free(lambda: MIB) == 0 and budget.last_rss == 100 * MIB  # a sample used


def test_evicts_when_the_calibrated_state_passes_the_budget_and_to_eighty_percent_of_it() -> None:
    series = [100 * MIB]
    budget = MemoryBudget(64 * MIB, rss=lambda: series[-1], interval=0)
    assert sampled(budget).to_free(lambda: 10 * MIB) == 0  # 10 MiB estimated, ratio 1: under
    series.append(130 * MIB)  # +30 MiB real for +10 MiB estimated: ratio (1 + 3) / 2
    assert sampled(budget).to_free(lambda: 10 * MIB) == 0
    assert budget.ratio == 2.0
    series.append(170 * MIB)  # +40 real for +10 estimated: ratio (2 + 4) / 2 = 3; 60 real
    assert sampled(budget).to_free(lambda: 20 * MIB) == 0
    assert budget.ratio == 3.0
    series.append(180 * MIB)  # +10 real for +5 estimated: ratio 2.5; 25 x 2.5 = 62.5 real
    assert sampled(budget).to_free(lambda: 25 * MIB) == 0
    series.append(200 * MIB)  # +20 for +5: ratio 3.25; 30 x 3.25 = 97.5 > 64: evict
    need = sampled(budget).to_free(lambda: 30 * MIB)
    assert budget.ratio == 3.25
    assert need == 30 * MIB - int(0.8 * 64 * MIB / 3.25)


def test_rss_that_stays_high_after_an_eviction_does_not_evict_again() -> None:
    """Freed memory is kept by the allocators: RSS does not fall, and must not be read as
    state (the spiral that evicts everything while RSS stays put)."""
    series = [100 * MIB, 300 * MIB]
    budget = MemoryBudget(64 * MIB, rss=lambda: series[-1], interval=0)
    budget.ratio = 2.0
    assert sampled(budget).to_free(lambda: 40 * MIB) > 0  # 80 MiB real: over
    for _ in range(5):
        assert sampled(budget).to_free(lambda: 25 * MIB) == 0  # evicted to 50 real; RSS unchanged
    assert budget.ratio == 2.0


def test_the_ratio_stays_within_its_bounds() -> None:
    series = [0]
    budget = MemoryBudget(1 << 40, rss=lambda: series[-1], interval=0)
    series.append(1000 * MIB)  # a huge RSS step for a small estimate: capped at 8
    sampled(budget).to_free(lambda: 2 * MIB)
    series.append(1001 * MIB)
    sampled(budget).to_free(lambda: 40 * MIB)
    assert 1.0 <= budget.ratio <= 8.0
    series.append(1002 * MIB)  # less real than estimated: not below 1
    sampled(budget).to_free(lambda: 400 * MIB)
    assert budget.ratio >= 1.0


def test_give_back_memory_returns_freed_pages_to_the_os() -> None:
    """Freed blocks between live ones stay in the C allocator's free lists (RSS does not
    fall); `give_back_memory` (after an eviction asked for by name) returns their pages."""
    keep, drop = [], []
    for _ in range(20_000):  # 16 kB blocks, each between two live 600-byte ones
        drop.append(bytearray(16_000))
        keep.append(bytearray(600))
    drop.clear()
    gc.collect()
    freed = process_rss()
    give_back_memory()
    assert process_rss() < freed - (150 << 20), "the 305 MiB freed stayed in the process"
    assert len(keep) == 20_000
