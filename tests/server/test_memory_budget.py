"""When the server evicts (memory_budget.py): sizes as the flag takes them, and the decision
from a resident-set series (given here as a list, in place of /proc) against the budget, with
the calibration of estimated bytes to real ones and no spiral once memory is reused."""

from __future__ import annotations

import pytest

from pomoview.server.memory_budget import MemoryBudget, parse_bytes, process_rss

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
    before = process_rss()
    block = bytearray(64 * MIB)
    block[:: 4096] = b"\x01" * len(block[:: 4096])  # touch every page
    assert process_rss() - before > 48 * MIB
    del block


def test_evicts_only_over_the_budget_and_to_eighty_percent_of_it_in_calibrated_units() -> None:
    series = [100 * MIB]
    budget = MemoryBudget(64 * MIB, rss=lambda: series[-1], interval=0)
    assert budget.to_free(lambda: 10 * MIB) == 0  # nothing grew
    series.append(150 * MIB)  # +50 MiB, under the budget: calibrates (50 real per 10 estimated)
    assert budget.to_free(lambda: 10 * MIB) == 0
    assert budget.ratio == 5.0
    series.append(180 * MIB)  # +80 MiB real, 16 estimated: over; ratio 5
    need = budget.to_free(lambda: 16 * MIB)
    assert need == 16 * MIB - int(0.8 * 64 * MIB / 5.0)
    # Evicted, but RSS stays where it was (freed memory is kept for reuse): the estimate is
    # now at the target, so nothing more is evicted until the state grows past it again.
    target = 16 * MIB - need
    assert budget.to_free(lambda: target) == 0
    assert budget.to_free(lambda: target + MIB) == MIB
    assert budget.ratio == 5.0, "no new high: the calibration stands"


def test_an_estimate_above_real_memory_does_not_shrink_the_budget() -> None:
    series = [0]
    budget = MemoryBudget(64 * MIB, rss=lambda: series[-1], interval=0)
    series.append(100 * MIB)
    assert budget.to_free(lambda: 400 * MIB) == 400 * MIB - int(0.8 * 64 * MIB)
    assert budget.ratio == 1.0
