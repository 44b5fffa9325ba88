"""bench/recursive_lookup.py at a tiny scale, so that it cannot rot: two real servers one
after the other (partial, and under a 1K memory budget), real loads, every phase (first,
cold and warm lookups with BFS and clingo alternated, Zipf lookups, the states, an edge
inserted and deleted, RSS, the budget's eviction of every key), every answer checked
against BFS inside the benchmark (which raises on a mismatch). Figures are printed, not
asserted, except what demand guarantees: the Reader holds exactly the demanded closures,
and the budget's eviction after a write leaves no key demanded. The --full-state peer (a
third server: another 10-20 s of Spark boot and loads) is left out (`--no-full`) to stay
under 40 s."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import recursive_lookup  # noqa: E402


def test_the_recursive_lookup_benchmark_runs_at_a_tiny_scale(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--scale", "0.001", "--lookups", "30", "--cold", "3", "--updates", "1"]
    out = recursive_lookup.main([*argv, "--evict-keys", "5", "--no-full"])
    printed = capsys.readouterr().out
    assert "answers checked against BFS (pomoview, clingo): all equal" in printed
    assert "full_state" not in out
    for ds in recursive_lookup.DATASETS:
        assert f"{ds.view}({ds.columns[0]}):" in printed
        r = out[ds.name]
        assert len(r["cold"]["s"]) == len(r["cold"]["bfs"]) == len(r["cold"]["clingo"]) == 3
        assert r["first_jobs"] >= 1 and all(s > 0 for s in r["cold"]["warm"])
        assert len(r["zipf"]["cold"]) + len(r["zipf"]["warm"]) == 30
        assert r["state"]["reader"] == r["closures"] <= r["full"]
        assert len(r["updates"]["insert"]) == len(r["updates"]["delete"]) == 1
        # Evict of everything on the same server: no reader row left, every demand released.
        assert r["evicted"]["keys_evicted"] > 0 and r["state_evicted"]["reader"] == 0, r["state_evicted"]
        assert any(" 0 demanded" in g for g in r["state_evicted"]["gate"]), r["state_evicted"]["gate"]
        evict = out["evict"][ds.name]
        # The budget evicts during the lookups too, so the write's eviction is what is
        # checked: no key is left, and the gate released every key it demanded.
        assert evict["present"] == 0 and evict["rounds"] > 0, evict
        assert any(" 0 demanded" in g for g in evict["state"]["gate"]), evict["state"]["gate"]
