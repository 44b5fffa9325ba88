"""Unit: one empty tuple, never changing."""

from __future__ import annotations

from pomoview.dataflow.operators.unit import Unit
from pomoview.dataflow.zset import ZSet


def test_unit() -> None:
    unit = Unit()
    assert unit.schema == ()
    assert unit.query((), [()]) == ZSet({(): 1})
    assert unit.on_delta(0, ZSet({(): 1})) == ZSet()
    assert not unit.stateful and not unit.partial
