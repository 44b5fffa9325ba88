"""The Spark sessions the store reads with, and how it reads a part's files: the shared
session, given the settings the store's reads rely on, and a session of its own for keyed
fetches, whose settings suit small jobs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession

from pomoview.server.store.schema import part_file_struct
from pomoview.server.types import SourceSchema

# Up to this many keys of one column, the key filter is an IN list that Spark pushes into the
# Parquet reader (the session's `inFilterThreshold` is raised to it); beyond, a broadcast
# semi-join, which reads all of the keys' buckets but whose plan does not grow with the keys.
PUSH_LIMIT = 256
# A fetch passes one path per file it reads; Spark lists more than its default 32 paths with a
# distributed job, which would cost more than the fetch.
_LISTING_THRESHOLD = 4096
_READ_SETTINGS = {
    "spark.sql.parquet.pushdown.inFilterThreshold": str(PUSH_LIMIT),
    "spark.sql.sources.parallelPartitionDiscovery.threshold": str(_LISTING_THRESHOLD),
}
# A keyed fetch reads a few thousand rows: whole-stage code generation compiles a new class
# for each fetch (its keys are literals in the generated code), which cost more than the
# scan itself (measured: two 93-key jobs at once 0.57 s with it, 0.46 s without; a 1-key
# job 0.17 -> 0.13 s). Expressions are still compiled where Spark finds it worth it.
_FETCH_CONF = {"spark.sql.codegen.wholeStage": "false"}
# Parquet's page-level filter costs (keys x pages) per file, more than it saves here: row-group
# statistics do the pruning.
_READ_OPTIONS = {"parquet.filter.columnindex.enabled": "false"}


def read_part_files(spark: SparkSession, schema: SourceSchema, paths: Sequence[str]) -> DataFrame:
    """The rows of the part files at `paths` of a source of `schema`."""
    return spark.read.schema(part_file_struct(schema)).options(**_READ_OPTIONS).parquet(*paths)


class ReadSessions:
    """`spark` is called whenever Spark is needed and returns the shared session."""

    def __init__(self, spark: Callable[[], SparkSession]) -> None:
        self._spark = spark
        self._lock = threading.Lock()  # guards _fetch_base and _fetch_spark
        self._configured: SparkSession | None = None
        self._fetch_base: SparkSession | None = None  # the session `_fetch_spark` was made from
        self._fetch_spark: SparkSession | None = None

    def shared(self) -> SparkSession:
        """The shared session, with the settings the store's reads rely on."""
        spark = self._spark()
        if self._configured is not spark:
            for key, value in _READ_SETTINGS.items():
                spark.conf.set(key, value)
            self._configured = spark
        return spark

    def fetch(self) -> SparkSession:
        """A session of its own for keyed fetches (sharing the SparkContext), with
        `_FETCH_CONF`, so that flushes, loads and compactions keep Spark's defaults."""
        spark = self.shared()
        with self._lock:
            if self._fetch_base is not spark:
                session = spark.newSession()
                for key, value in {**_FETCH_CONF, **_READ_SETTINGS}.items():
                    session.conf.set(key, value)
                self._fetch_base, self._fetch_spark = spark, session
            assert self._fetch_spark is not None
            return self._fetch_spark
