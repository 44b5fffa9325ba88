"""bench/lookup_at_rest.py at a tiny scale with short windows, so that it cannot rot: a real
server and the typed floor, every phase (1 and 100 keys per RPC, client and stub), and the
answers checked inside the benchmark (which raises on a mismatch). Figures are printed, not
asserted; here only that every row of the table has them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import lookup_at_rest  # noqa: E402


def test_the_lookup_at_rest_benchmark_runs_at_a_tiny_scale() -> None:
    argv = ["--articles", "300", "--votes", "3000", "--window", "0.3", "--windows", "1", "--threads", "2"]
    results = lookup_at_rest.main(argv)
    assert sorted(results) == ["1 client", "1 stub", "100 client", "100 stub"]
    for phase in results.values():
        for target in ("pomoview", "floor"):
            row = phase[target]
            assert row["keys_per_s"] > 0 and 0 < row["p50"] <= row["p99"], (phase, target)
            assert row["cpu_us_per_rpc"] > 0 and row["client_cpu_us_per_rpc"] > 0
