"""bench/wcoj_operator.py at a tiny scale, so that it cannot rot: both plans run, their
answers are checked equal inside the benchmark, and the worst-case-optimal plan holds no
two-path; three rules sharing e's indexes hold them once."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import wcoj_operator  # noqa: E402


def test_the_wcoj_operator_benchmark_runs_tiny() -> None:
    argv = ["--hub", "30", "--edges", "300", "--vertices", "100", "--writes", "4", "--rounds", "1"]
    out = wcoj_operator.main(argv)
    assert out["triangles"] > 0
    # e forward and reverse (one edge more during a write), nothing else
    assert out["wcoj"]["peak"] == 2 * (out["edges"] + 1)
    assert out["binary"]["peak"] > 30 * 30  # the hub's two-paths
    for plan in ("wcoj", "binary"):
        assert out[plan]["hydrate"] > 0 and out[plan]["write"] > 0
    # Three rules over e: e's two indexes once when shared, once per rule otherwise.
    assert out["shared"]["peak"] == 2 * out["edges"]
    assert out["own"]["peak"] == 3 * 2 * out["edges"]
    assert out["own"]["bytes"] > out["shared"]["bytes"]
