"""Fixtures shared by the whole test tree."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Every driver JVM of the run compiles with C1 only, as the server's own default has it
# (session.SERVER_DEFAULTS; create_spark_session gives this process's session the same).
#
# Every `pomoview serve` of the run keeps its Spark JVM at its own CPU priority: the suite's
# two workers contend for the cores, and a JVM below them starved its server's upqueries
# (`serve --spark-nice`, default 10, is for a server beside its readers, not for tests whose
# load runs for a fixed time). test_config.py checks the default with this variable unset.
os.environ.setdefault("POMOVIEW_SPARK_NICE", "0")
# As the server does (server/__init__.py), before any test module imports grpc: this process
# boots its Spark session, a fork, while its gRPC clients and in-process servers run.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole run; the JVM starts only if a test asks for it."""
    # Imported here so that test runs without pyspark (client-only installs) still collect.
    from pomoview.server.spark.session import create_spark_session

    session = create_spark_session("local[2]")
    yield session
    session.stop()
