"""bench/top_k_refill.py at a tiny scale, so that it cannot rot: both variants run, every
window after a delete equals the sorted model inside the benchmark, and the figures it
prints hold what the table claims: a refill in order reads two rows, a pull the key."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import top_k_refill  # noqa: E402


def test_the_refill_benchmark_runs_tiny() -> None:
    out = top_k_refill.main(["--rows", "300", "--deletes", "15", "--rounds", "1"])
    assert out["wrong"] == 0
    [pull], [ordered] = out["pull"], out["in order"]
    assert pull["refills"] == ordered["refills"] == 15
    assert min(pull["pulled"]) > 250 and pull["built"] == 0  # the key, less the deletes
    assert ordered["pulled"] == [2] * 15  # one place, and one row more: still cut
    assert 300 <= ordered["built"] <= 2 * 300  # at the fill, and once grown by doubling
