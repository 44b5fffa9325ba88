"""bench/recursive_triangles.py at a tiny scale, so that it cannot rot: both plans run, each in
a process of its own, every answer (after the first read and after each write) is checked
against the Python closure inside the benchmark, and only the planner's plan has a WcojJoin."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import recursive_triangles  # noqa: E402


def test_the_recursive_triangles_benchmark_runs_tiny() -> None:
    out = recursive_triangles.main(["--edges", "400", "--vertices", "200", "--starts", "3", "--rounds", "1"])
    assert out["wcoj"]["pairs"] == out["binary"]["pairs"] == out["python"]["pairs"] > 3
    assert out["wcoj"]["ok"] and out["binary"]["ok"]
    assert out["wcoj"]["wcoj"] and not out["binary"]["wcoj"]
    for plan in ("wcoj", "binary"):
        assert out[plan]["hydrate"] > 0 and out[plan]["insert"] > 0 and out[plan]["delete"] > 0
