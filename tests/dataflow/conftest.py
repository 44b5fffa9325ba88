"""Makes the shared harness (dataflow_harness.py) importable by the tests of this folder."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
