"""Fixtures shared by the whole test tree."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole run; the JVM starts only if a test asks for it."""
    # Imported here so that test runs without pyspark (client-only installs) still collect.
    from pomoview.server.spark_session import create_spark_session

    session = create_spark_session("local[2]")
    yield session
    session.stop()
