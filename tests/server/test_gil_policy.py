"""server/scheduler/gil_policy.py: with a hit replica the server's process lets a thread hold
the interpreter lock for SWITCH_INTERVAL_WITH_REPLICA before it must offer it; without one, for
the short SWITCH_INTERVAL (the hits are answered in this process)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from pomoview.server.scheduler.gil_policy import (
    SWITCH_INTERVAL,
    SWITCH_INTERVAL_WITH_REPLICA,
    set_switch_interval,
)


@pytest.fixture
def interval() -> Iterator[float]:
    """The test process's interval, set back afterwards."""
    before = sys.getswitchinterval()
    try:
        yield before
    finally:
        sys.setswitchinterval(before)


def test_with_a_replica_the_interval_is_the_longer_one(interval: float) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL)
    assert SWITCH_INTERVAL_WITH_REPLICA > 10 * SWITCH_INTERVAL
    assert set_switch_interval(hit_replica=True) == pytest.approx(SWITCH_INTERVAL_WITH_REPLICA)
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_WITH_REPLICA)


def test_without_a_replica_the_interval_is_the_short_one(interval: float) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_WITH_REPLICA)
    assert set_switch_interval(hit_replica=False) == pytest.approx(SWITCH_INTERVAL)
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL)
