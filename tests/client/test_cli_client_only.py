"""`pomoview.server.cli.commands` must import on a client-only install (no pyspark, no lark)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules['pyspark'] = None
sys.modules['lark'] = None
import pomoview.server.cli.commands
heavy = [m for m in ('pomoview.server.api.app', 'pomoview.planner', 'pomoview.dataflow')
         if m in sys.modules]
assert not heavy, heavy
"""


def test_cli_imports_without_server_extras() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
