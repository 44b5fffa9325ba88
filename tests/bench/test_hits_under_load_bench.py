"""bench/hits_under_load.py at scale 0.01 with half-second windows, one per target, so that it
cannot rot: a real server, a real load, both peers, every phase (idle, busy with its writer,
cold misses, subscription and stats sampler, at rest batched), write -> visible, and the 50
answers and the subscription's counts checked against numpy inside the benchmark (which
raises on a mismatch). Figures are printed, not asserted; here only that every row of the
table has them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import hits_under_load  # noqa: E402


def test_the_hits_under_load_benchmark_runs_at_scale_one_hundredth() -> None:
    out = hits_under_load.main(["--scale", "0.01", "--window", "0.5", "--windows", "1", "--visible", "5"])
    reads = out["reads"]
    peers = {
        "idle client": "echo",
        "idle stub": "echo",
        "busy client": "echo",
        "busy stub": "echo",
        "batched": "typed floor",
    }
    for phase, peer in peers.items():
        for target in ("pomoview", peer):
            row = reads[phase][target]
            assert row["keys_per_s"] > 0 and row["p50"] > 0 and row["errors"] == 0, (phase, target, row)
            assert row["p50"] <= row["p90"] <= row["p99"] <= row["p999"]
    busy = out["busy"]
    # Over the whole busy load, not only its measured windows (which a stall could outlast).
    assert busy["batches"] > 0 and busy["acked_votes_per_s"] > 0 and busy["applied_votes_per_s"] >= 0
    assert busy["subscription"]["changes_total"] > 0 and busy["cold"]["misses_total"] > 0
    assert out["errors"] == []
    # Where the cores went over the busy windows: the server applied writes, its JVM ran the
    # cold misses' jobs, the load process wrote, and the readers here read.
    cpu = busy["cpu"]
    assert set(cpu) >= {"server", "hit replica", "Spark JVM", "busy load", "bench (readers)", "echo peer"}
    assert cpu["server"] > 0 and cpu["Spark JVM"] > 0 and cpu["busy load"] > 0 and cpu["bench (readers)"] > 0
    assert sum(cpu.values()) <= (os.cpu_count() or 1) * 1.05
    assert out["visible"]["n"] == 5 and out["visible"]["p50"] > 0
    check = out["check"]
    assert check["ids"] == 50 and check["wrong"] == [] and check["subscription"] == []
