"""Keys of a derived attribute that type inference left untyped (ANY), in-process over real
Spark: no declaration constrains such an attribute, so a value of any type is a key of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pomoview.planner.frontend.cid import cid
from pomoview.server.errors import InvalidArgument
from pomoview.server.scheduler.scheduler import Scheduler

# f and g only copy each other, so x is typed nowhere: it is ANY in f, g and i.
UNTYPED = """
source s(x: int).
view i(x).
view j(x).
f(x: X) :- g(x: X).
g(x: X) :- f(x: X).
i(x: X) :- f(x: X).
j(x: X) :- s(x: X).
"""

KEYS = [
    ("int", 1),
    ("float", 2.5),
    ("string", "a"),
    ("bool", True),
    ("bytes", b"\x00"),
    ("cid", cid("s", [("x", 1)])),
]


def test_a_key_of_an_untyped_attribute_may_have_any_type(tmp_path: Path, spark: Any) -> None:
    scheduler = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    scheduler.start()
    try:
        scheduler.install(UNTYPED)
        assert scheduler.program is not None
        assert scheduler.program.relations["i"].types == {"x": "any"}
        epoch = scheduler.write([("s", [{"x": ("int", 1)}], [])])
        for kind, value in KEYS:
            rows, _ = scheduler.lookup("i", [{"x": (kind, value)}], min_epoch=epoch)
            assert rows == [[]], (kind, value)  # f is empty: no rows, and no refusal
        # A typed attribute still refuses a key of another type.
        assert scheduler.lookup("j", [{"x": ("int", 1)}], min_epoch=epoch)[0] == [[{"x": 1}]]
        with pytest.raises(InvalidArgument, match=r"keys\[0\]\.x: expected int, got string 'a'"):
            scheduler.lookup("j", [{"x": ("string", "a")}])
    finally:
        scheduler.stop()
