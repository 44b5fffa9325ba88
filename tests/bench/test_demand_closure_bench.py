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
    assert len(out["demand"]["lookup"]) == 4 and all(s > 0 for s in out["demand"]["lookup"])
    assert out["held_after"] == 0
    assert out["demand"]["held_peak"] == max(out["closure_rows"])
    assert out["full"]["rows"] >= max(out["closure_rows"])
