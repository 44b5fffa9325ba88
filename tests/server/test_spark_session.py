"""SparkProvider's lifecycle, with a stand-in factory (no JVM)."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession

from pomoview.server.spark_session import SparkProvider


class FakeSession:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_created_once_lazily_and_stopped() -> None:
    made: list[FakeSession] = []

    def factory() -> SparkSession:
        made.append(FakeSession())
        return cast(SparkSession, made[-1])

    provider = SparkProvider(factory)
    assert made == []
    first = provider()
    assert provider() is first and len(made) == 1
    provider.stop()
    assert made[0].stopped
    with pytest.raises(RuntimeError):
        provider()


def test_background_start_and_callers_wait_for_it() -> None:
    release = threading.Event()
    session = FakeSession()

    def slow_factory() -> SparkSession:
        release.wait(5)
        return cast(SparkSession, session)

    provider = SparkProvider(slow_factory)
    thread = provider.start_in_background()
    result: list[Any] = []
    caller = threading.Thread(target=lambda: result.append(provider()))
    caller.start()
    release.set()
    caller.join(5)
    thread.join(5)
    assert result == [session]
    assert provider.background_error is None


def test_background_failure_is_kept_and_retried() -> None:
    attempts: list[int] = []

    def factory() -> SparkSession:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("no JVM")
        return cast(SparkSession, FakeSession())

    provider = SparkProvider(factory)
    provider.start_in_background().join(5)
    assert isinstance(provider.background_error, OSError)
    assert isinstance(provider(), FakeSession)
    assert len(attempts) == 2
