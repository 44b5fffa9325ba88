"""Fixtures shared by the whole test tree."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

sys.path.insert(0, str(Path(__file__).parent))
import jvm_cache  # noqa: E402

# Every driver JVM of the run (this process's, and each `pomoview serve`'s, which inherit the
# environment): C1 only, and Spark's classes from a shared archive once it is built.
jvm_cache.use_in_environment()
_archive_builder: list[subprocess.Popen[bytes] | None] = [None]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Only a run that boots JVMs builds the archive (a minute of one core, in the background).
    if any("e2e/" in item.nodeid or "spark" in getattr(item, "fixturenames", ()) for item in items):
        _archive_builder[0] = jvm_cache.start_building()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    jvm_cache.use_in_environment()  # the archive, once built, for the servers this test starts


def pytest_sessionfinish() -> None:
    jvm_cache.stop_building(_archive_builder[0])


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole run; the JVM starts only if a test asks for it."""
    # Imported here so that test runs without pyspark (client-only installs) still collect.
    from pomoview.server.spark_session import create_spark_session

    session = create_spark_session("local[2]")
    yield session
    session.stop()
