"""bench/demand_closure.py on a small graph, so that it cannot rot: the demanded lookups,
their evictions, the full closure, every answer checked against BFS inside the benchmark
(which raises on a mismatch). Figures are printed, not asserted; here only that they are
there, and that evicting every key leaves no demanded row behind."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import demand_closure  # noqa: E402


def test_the_demand_closure_benchmark_runs_on_a_small_graph() -> None:
    out = demand_closure.main(["--nodes", "120", "--edges", "300", "--keys", "4"])
    demand = out["demand"]
    assert len(demand["cold"]) == len(demand["update"]) == 4 and all(s > 0 for s in demand["cold"])
    assert demand["held_after"] == 0
    # Left-linear closure: the demanded relation holds exactly the demanded keys' closures.
    assert demand["held_rows"] == demand["closures"] == sum(out["closure_rows"])
    assert out["full"]["rows"] >= max(out["closure_rows"])
