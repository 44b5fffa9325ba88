"""bench/vote.py at scale 0.01, so that it cannot rot: a real server, a real load, the Spark
query and echo peers, 50 answers checked against numpy inside the benchmark. Figures are
printed, not asserted; here only that every phase ran and produced its figures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import vote  # noqa: E402


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_the_vote_benchmark_runs_at_scale_one_hundredth() -> None:
    out = vote.main(["--scale", "0.01", "--reps", "1", "--cold", "3", "--hit-seconds", "0.5",
                     "--budget-seconds", "5"])
    assert out["checked"] == 50
    assert out["cold"]["p50"] > 0 and out["cold"]["peer_p50"] > 0
    assert out["hot"]["ours"] > 0 and out["hot"]["peer"] > 0
    assert out["concurrent"]["wall"] > 0 and out["concurrent"]["jobs"] >= 2
    assert out["warm"]["held_votes"] > 0
    assert all(out["hits"][per]["ours"] > 0 and out["hits"][per]["echo"] > 0 for per in (1, 100))
    assert out["budget"]["errors"] == 0, out["budget"]["first_error"]
    assert out["budget"]["peak_rss"] > 0
    for run in (out["noria_partial"], out["noria_full"]):  # partial under 256 MiB, full state
        assert run["errors"] == 0, run["first_error"]
        assert run["keys_per_s"] > 0 and run["state_bytes"] > 0
    assert {name for name, _, _ in out["phases"]} >= {"loaded", "warmed", "warm hits"}
