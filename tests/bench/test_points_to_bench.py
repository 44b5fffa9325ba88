"""bench/points_to.py on a few thousand facts, so that it cannot rot: the engine and clingo
from scratch and after one-fact changes, every answer compared inside the benchmark (which
raises on a difference). Figures are printed, not asserted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import points_to  # noqa: E402


def test_the_points_to_benchmark_runs_and_agrees_with_clingo() -> None:
    out = points_to.main(["--facts", "4000", "--reps", "1", "--updates", "2", "--density", "0.7"])
    assert out["facts"] == 4000
    # Both relations derived something beyond the allocations, so the recursion ran.
    assert out["derived"]["pointsTo"] > 1000 and out["derived"]["heap"] > 0
    assert [kind for kind, _ in out["changes"]] == ["insert", "delete"]
    assert out["pomoview_s"] > 0 and out["clingo_s"] > 0
