"""bench/top_k.py at scale 0.01 with short windows, so that it cannot rot: a real server, the
bulk load, DuckDB and the sorted model, every phase (cold, warm windows, at rest, the state
of every node, the top row's delete and the writes beside it), and the answers checked inside
the benchmark (which raises on a mismatch). Figures are printed, not asserted; here only that
the table has them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import top_k  # noqa: E402


def test_the_top_k_benchmark_runs_at_scale_one_hundredth() -> None:
    argv = ["--scale", "0.01", "--window", "0.3", "--windows", "1", "--cold", "3", "--deletes", "2"]
    out = top_k.main(argv)
    assert out["checked"] > 500 and out["wrong"] == []
    for view in top_k.VIEWS:
        for group in ("hot", "tail"):
            cell = out["cold"][view][group]
            assert cell["s"] and all(s > 0 for s in cell["s"]), (view, group)
            if view == "all":
                # story by author is topStories' SourceIndex too, filled by its lookup just
                # before: the graph's one index per source and key columns.
                assert max(cell["fetched"]) == 0 and max(cell["jobs"]) == 0, (view, group, cell)
            else:
                assert min(cell["fetched"]) > 0 and min(cell["jobs"]) >= 1, (view, group, cell)
            assert bool(cell["duck"]) == (view != "all")
        for phase in ("zipf", "small"):
            row = out["warm"][phase][view]
            assert row["keys_per_s"] > 0 and 0 < row["p50"] <= row["p99"], (phase, view, row)
        operators = [n["operator"] for n in out["state"][view]]
        assert operators[-1] == ("Reader" if view == "all" else "TopK")
        # newestStories' rows are story's tuples: its TopK reads a SourceWindow of its own.
        assert ("SourceWindow" if view == "newest" else "SourceIndex") in operators, operators
    for view in ("newest", "top"):
        for peer in ("pomoview", "duckdb", "model"):
            assert 0 < out["rest"][view][peer]["p50"] <= out["rest"][view][peer]["p99"]
    assert list(out["deletes"]) == list(top_k.DELETE_TRIALS)
    for kind, trials in out["deletes"].items():
        assert len(trials) == 2 and all(t["s"] > 0 for t in trials), kind
    # newestStories: the top row's delete leaves the window of `limit` rows short; the key is
    # evicted, and the lookup after it fills the window again with one Spark job.
    for trial in out["deletes"]["newest"]:
        assert trial["jobs"] == 1, trial
        window = [c for c in trial["nodes"].values() if c.startswith("SourceWindow")]
        assert window and "fills +1" in window[0] and "evictions +1" in window[0], trial
    # topStories: its TopK refills the cut window in the step, pulling from the state above:
    # no eviction, no fill through a lookup.
    for view in ("top",):
        topk = [c for c in out["deletes"][view][0]["nodes"].values() if c.startswith("TopK")]
        assert topk and "refills +1" in topk[0] and "pulled rows +" in topk[0], out["deletes"][view][0]
        changed = topk[0].removeprefix("TopK ").split(", ")
        assert not any(c.startswith(("evictions", "fills")) for c in changed), topk[0]
