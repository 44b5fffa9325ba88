"""bench/scaling_sim.py at a tiny scale, so that it cannot rot: the simulation with the
recorded costs (its `--measure` runs a real server, as bench/lookup_latency.py does)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scaling_sim  # noqa: E402


def test_the_scaling_simulation_prints_its_table() -> None:
    workload = scaling_sim.Workload(articles=2_000, cache_keys=200, operations=20_000)
    text = scaling_sim.table(scaling_sim.Costs(), workload)
    rows = {tuple(line.split()[:2]): line.split() for line in text.splitlines()[3:]}
    layouts = {("one", "1"), ("replicas", "4"), ("shards", "4"), ("replicas", "16"), ("shards", "16")}
    assert set(rows) == layouts
    hit = {key: float(row[2]) for key, row in rows.items()}
    # Shards pool their memory: more of the keys are held, so more lookups hit.
    assert hit[("shards", "16")] > hit[("replicas", "16")]
    assert hit[("shards", "4")] > hit[("one", "1")]
    # Every replica applies every vote to the keys it holds: each of 16 does about the work
    # of one server alone, so writes do not scale with replicas; shards split the votes
    # (each vote once, the shard of the hottest article taking the most).
    one = scaling_sim.simulate(workload, 1, "replicas").applied[0]
    assert scaling_sim.simulate(workload, 16, "replicas").applied.min() > 0.8 * one
    shards = scaling_sim.simulate(workload, 16, "shards").applied
    assert shards.sum() <= workload.operations and shards.max() < 0.5 * one
