"""The scheduler in-process, over real Spark (the shared session) and real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pomoview.server.errors import FailedPrecondition, InvalidArgument, NotFound, OutOfRange
from pomoview.server.scheduler import Scheduler

PROGRAM_A = """
source a(x: int, y: string).
source b(x: int).
view v(x).
v(x: X, n: N) :- b(x: X), N := count : a(x: X).
"""
PROGRAM_B = """
source b(x: int).
view w(x).
w(x: X) :- b(x: X), X > 1.
"""


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    kinds = {int: "int", str: "string", float: "float", bool: "bool"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def make(tmp_path: Path, spark: Any) -> Scheduler:
    scheduler = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    scheduler.start()
    return scheduler


def test_restart_after_a_program_dropped_a_source(tmp_path: Path, spark: Any) -> None:
    s = make(tmp_path, spark)
    s.install(PROGRAM_A)
    s.write([("a", [row(x=1, y="p"), row(x=1, y="q")], []), ("b", [row(x=1), row(x=2)], [])])
    epoch = s.write([("a", [], [row(x=1, y="p")])])
    assert s.lookup("v", [row(x=1)], min_epoch=epoch)[0] == [[{"x": 1, "n": 1}]]
    s.install(PROGRAM_B)  # `a` is no longer declared, but its writes are in the log
    s.stop()
    s = make(tmp_path, spark)
    try:
        assert s.durable_epoch == epoch
        assert s.lookup("w", [row(x=2)])[0] == [[{"x": 2}]]
        with pytest.raises(NotFound):
            s.lookup("v", [row(x=1)])
    finally:
        s.stop()


def test_flush_then_overlay_gives_the_applied_state(tmp_path: Path, spark: Any) -> None:
    s = make(tmp_path, spark)
    try:
        s.install(PROGRAM_A)
        s.write([("b", [row(x=5)], [])])
        s.write([("a", [row(x=5, y=str(i)) for i in range(4)], [])])
        flushed_through = s.write([("a", [], [row(x=5, y="0")])])
        s.lookup("v", [row(x=6)], min_epoch=flushed_through)  # waits until applied
        assert s.flush() == flushed_through
        epoch = s.write([("a", [row(x=5, y="9")], [row(x=5, y="1")])])  # only in the log tail
        assert s.lookup("v", [row(x=5)], min_epoch=epoch)[0] == [[{"x": 5, "n": 3}]]
    finally:
        s.stop()


def test_refusals_change_nothing(tmp_path: Path, spark: Any) -> None:
    s = make(tmp_path, spark)
    try:
        with pytest.raises(FailedPrecondition):
            s.write([("b", [row(x=1)], [])])
        s.install(PROGRAM_A)
        epoch = s.write([("b", [row(x=1)], [])])
        with pytest.raises(InvalidArgument):
            s.write([("b", [row(x=2)], []), ("a", [row(x="no", y="p")], [])])
        with pytest.raises(FailedPrecondition):
            s.install("source b(x: string).\n")  # b holds ints
        with pytest.raises(OutOfRange):
            s.lookup("v", [row(x=1)], min_epoch=epoch + 5)
        assert s.durable_epoch == epoch
        assert s.lookup("v", [row(x=1)], min_epoch=epoch)[0] == [[{"x": 1, "n": 0}]]
        assert s.lookup("v", [row(x=2)])[0] == [[]]
    finally:
        s.stop()
