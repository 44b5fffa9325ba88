"""bench/triangles.py at a tiny scale, so that it cannot rot: the bench as a command (its exit
status is the check), one round of both plans on real servers over one loaded data folder,
DuckDB and clingo, every phase (the whole view's hydration and states, the writes until
visible, the keyed view from nothing). The bench checks every answer against DuckDB's and
clingo's and `explain`'s plan against the server's flag, and exits non-zero when one
differs; here its status, the line saying they matched, and that the tables are there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "triangles.py"


def test_the_triangles_benchmark_runs_tiny_and_its_answers_match() -> None:
    argv = ["--edges", "1500", "--rounds", "1", "--writes", "1", "--keys", "2"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(BENCH), *argv], capture_output=True, text=True, timeout=600, env=env
    )
    printed = done.stdout
    assert done.returncode == 0, f"exit {done.returncode}\n{printed[-4000:]}\n{done.stderr[-4000:]}"
    assert "checked against DuckDB and clingo, explain's plans too: all equal" in printed, printed[-3000:]
    assert "FAILED" not in printed
    for line in ("the two plans, medians of 1 rounds", "peers in the same run", "goals (reported"):
        assert line in printed, printed[-3000:]
    # The states table: the whole view's WcojJoin under the default plan, the two-paths'
    # Join under --binary-joins.
    assert "| WcojJoin " in printed and "Join(on ('A', 'C'), full)" in printed, printed[-3000:]
