"""bench/transitive_closure.py at a tiny scale, so that it cannot rot: the bench as a command
(its exit status is the check). It checks the circuit's closure against BFS after the first
epoch and after every update, and clingo's count of `tc` atoms against BFS, and exits
non-zero when one differs; here its status, that clingo's row is there with BFS's count, and
that the from-scratch epochs alternated with it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "transitive_closure.py"


def test_the_closure_benchmark_runs_tiny_with_clingo_beside_it() -> None:
    argv = ["--nodes", "60", "--edges", "150", "--updates", "1", "--reps", "2"]
    done = subprocess.run([sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=300)
    printed = done.stdout
    assert done.returncode == 0, f"exit {done.returncode}\n{printed[-3000:]}\n{done.stderr[-3000:]}"
    pairs = re.search(r"closure ([\d,]+) pairs", printed)
    assert pairs is not None, printed
    assert f"peer: clingo {pairs.group(1)} tc atoms, median of 2" in printed, printed
    assert "| from scratch, median of 2 (" in printed, printed
    assert "bytes per pair" in printed and "note: clingo" not in printed, printed
