"""The driver JVM options of a test run: C1 only, and a class-data-sharing archive of Spark's
classes once one is built.

A test run boots a few dozen driver JVMs (one per `pomoview serve`, one in-process), and
most of each boot and of its first Spark job is spent loading and verifying Spark's classes.
A dynamic CDS archive (JDK 13+) maps them ready-made: measured here, a boot and its first
jobs took 6 + 6 s with it instead of 10 + 16 s with C1 alone. The archive is built once per
virtualenv, JDK and pyspark, in the background, by a JVM that runs the store's own jobs and
dumps what it loaded when it exits (`python tests/jvm_cache.py ARCHIVE`); JVMs launched before
it is there run without it. A JVM that cannot use an archive ignores it (-Xshare:auto).

A run that sets PYSPARK_SUBMIT_ARGS itself keeps them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A test JVM lives seconds to minutes, never long enough for C2's code to pay for C2's
# compiler threads, which on two shared cores take CPU from everything else: boots measured
# at 9-11 s instead of 16-20 s, and the first jobs and lookups after them no slower.
C1_ONLY = "-XX:TieredStopAtLevel=1"
_OURS = "POMOVIEW_TEST_SUBMIT_ARGS"  # marks PYSPARK_SUBMIT_ARGS as set here, to be refreshed
_STALE_BUILD = 900.0  # seconds after which a build marker is taken for a dead build's


def _submit_args(options: str) -> str:
    return f"--driver-java-options '{options}' pyspark-shell"


@functools.cache
def archive_path() -> Path | None:
    """Where this virtualenv's archive for this JDK and pyspark lives; None without java."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")  # as spark-class finds it
    if java is None or not os.path.exists(java):
        return None
    try:
        import pyspark
    except ImportError:
        return None
    real = os.path.realpath(java)
    key = f"{real} {os.stat(real).st_mtime_ns} {pyspark.__version__} {Path(pyspark.__file__).parent}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(sys.prefix) / "spark-cds" / f"spark-{digest}.jsa"


def use_in_environment() -> None:
    """Sets PYSPARK_SUBMIT_ARGS for the JVMs launched from now on (this process's, and those
    of the processes it starts), with the archive if it is built; a value set outside the
    test run is left alone."""
    current = os.environ.get("PYSPARK_SUBMIT_ARGS")
    if current is not None and os.environ.get(_OURS) != current:
        return
    options = C1_ONLY
    archive = archive_path()
    if archive is not None and archive.exists():
        options += f" -XX:SharedArchiveFile={archive}"
    os.environ["PYSPARK_SUBMIT_ARGS"] = os.environ[_OURS] = _submit_args(options)


def start_building() -> subprocess.Popen[bytes] | None:
    """Starts building the archive in the background, unless it exists or another run of this
    virtualenv builds it; returns the builder, to be ended with `stop_building`."""
    archive = archive_path()
    if archive is None or archive.exists():
        return None
    archive.parent.mkdir(exist_ok=True)
    marker = archive.with_suffix(".building")
    try:
        if time.time() - marker.stat().st_mtime > _STALE_BUILD:
            marker.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return None  # another run is building it
    os.close(fd)
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(archive)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its JVM and all, ended together by stop_building
    )


def stop_building(builder: subprocess.Popen[bytes] | None) -> None:
    """Ends a build still running when the test run ends (the next run starts it again)."""
    if builder is None:
        return
    if builder.poll() is None:
        os.killpg(builder.pid, 9)
        builder.wait()
    archive = archive_path()
    if archive is not None:
        archive.with_suffix(".building").unlink(missing_ok=True)


def _build(archive: Path) -> None:
    """Runs the store's jobs in a JVM that dumps the classes it loaded into `archive` at exit."""
    archive.parent.mkdir(exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    os.environ["PYSPARK_SUBMIT_ARGS"] = _submit_args(f"{C1_ONLY} -XX:ArchiveClassesAtExit={partial}")
    from pyspark import SparkContext

    from pomoview.server.source_store import SourceStore
    from pomoview.server.spark_session import create_spark_session
    from pomoview.server.types import LoggedBatch, SourceChange

    spark = create_spark_session("local[2]")
    proc = SparkContext._gateway.proc  # type: ignore[union-attr]
    with tempfile.TemporaryDirectory() as folder:
        store = SourceStore(str(Path(folder) / "store"), lambda: spark, buckets=4, rows_per_bucket=50)
        store.ensure_source("s", [("k", "int"), ("v", "string")])  # type: ignore[arg-type]
        store.cluster_by("s", ["k"])
        rows = [(k, str(v)) for k in range(30) for v in range(5)]
        store.load("s", spark.createDataFrame(rows, "k long, v string"), 1)
        store.flush([LoggedBatch(2, {"s": SourceChange(((1, "x"),), ((2, "1"),))})])
        with store.pinned() as pin:
            store.fetch("s", ("k",), [(1,), (2,)], at=pin)
            store.fetch_columns("s", ("k",), [(3,)], at=pin)
        store.compact("s")
        spark.stop()
    proc.stdin.close()  # the JVM exits at the end of its stdin, writing the archive first
    proc.wait()
    os.replace(partial, archive)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    try:
        _build(target)
    finally:
        target.with_suffix(".building").unlink(missing_ok=True)
        for stray in target.parent.glob(f"{target.stem}.{os.getpid()}.partial"):
            stray.unlink(missing_ok=True)
