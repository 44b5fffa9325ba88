"""bench/partial_memory.py at a tiny scale, so that it cannot rot: two real servers (partial
and --full-state), real loads and lookups; the benchmark itself checks every cold answer and
a sample of the Zipf answers against Python. Figures are printed, not asserted, except that
the partial server's states are all partial and the full server's all full."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import partial_memory  # noqa: E402


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_the_partial_memory_benchmark_runs_at_a_tiny_scale() -> None:
    results = partial_memory.main(["--scale", "0.002", "--cold", "2", "--batch", "200"])
    partial, full = results["partial"], results["full"]
    assert partial["partial_states"] == partial["states"] > 0
    assert full["partial_states"] == 0 and full["states"] > 0
    assert all(v["touched"] > 0 for v in partial["views"].values())
