"""bench/recursive_triangles.py at a tiny scale, so that it cannot rot: both programs, both
plans, each plan in a process of its own; every answer (after the first read and after each
write) is checked against the Python closure inside the benchmark, and only the planner's
plan has a worst-case-optimal operator (a WcojJoin outside the loop, a NestedWcoj in it)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import recursive_triangles  # noqa: E402


def test_the_recursive_triangles_benchmark_runs_tiny() -> None:
    argv = ["--edges", "400", "--vertices", "200", "--starts", "3", "--allowed", "60", "--rounds", "1"]
    out = recursive_triangles.main(argv)
    assert set(out) == {"outside", "through"}
    for shape, med in out.items():
        assert med["wcoj"]["pairs"] == med["binary"]["pairs"] == med["python"]["pairs"] > 3, shape
        assert med["wcoj"]["ok"] and med["binary"]["ok"], shape
        assert med["wcoj"]["wcoj"] and not med["binary"]["wcoj"], shape
        for plan in ("wcoj", "binary"):
            assert med[plan]["hydrate"] > 0 and med[plan]["insert"] > 0 and med[plan]["delete"] > 0
