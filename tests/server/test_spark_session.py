"""SparkProvider's lifecycle, with a stand-in factory (no JVM)."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from pomoview.server.spark.session import (
    SparkProvider,
    SparkProviderStopped,
    SparkSessionLost,
    spark_error_reason,
)


class FakeSession:
    def __init__(self) -> None:
        self.stopped = False
        self.discarded = False
        self.dead: str | None = None  # seen without probing the JVM, like an exited process
        self.dead_to_probe: str | None = None  # seen only by asking the JVM

    def stop(self) -> None:
        self.stopped = True


def fake_provider(factory: Any, kill_boot: Any = None) -> SparkProvider:
    def dead_reason(session: SparkSession, probe: bool) -> str | None:
        fake = cast(FakeSession, session)
        return fake.dead or (fake.dead_to_probe if probe else None)

    def discard(session: SparkSession) -> None:
        cast(FakeSession, session).discarded = True

    def no_kill(spared: frozenset[int]) -> None:
        raise AssertionError("no boot was running")

    return SparkProvider(
        factory,
        dead_reason=dead_reason,
        discard=discard,
        end=lambda session: cast(FakeSession, session).stop(),
        processes=lambda: frozenset({1, 2}),  # never the test run's own processes
        kill_boot=kill_boot or no_kill,
    )


def counting_factory() -> tuple[list[FakeSession], Any]:
    made: list[FakeSession] = []

    def factory() -> SparkSession:
        made.append(FakeSession())
        return cast(SparkSession, made[-1])

    return made, factory


def test_created_once_lazily_and_stopped() -> None:
    made, factory = counting_factory()
    provider = fake_provider(factory)
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

    provider = fake_provider(slow_factory)
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

    provider = fake_provider(factory)
    provider.start_in_background().join(5)
    assert isinstance(provider.background_error, OSError)
    assert isinstance(provider(), FakeSession)
    assert len(attempts) == 2


def test_a_dead_session_is_reported_once_then_replaced() -> None:
    made, factory = counting_factory()
    provider = fake_provider(factory)
    old = provider()
    made[0].dead = "the Spark driver JVM exited with status -9"
    with pytest.raises(SparkSessionLost) as lost:
        provider()
    assert lost.value.reason == "the Spark driver JVM exited with status -9"
    assert made[0].discarded and not made[0].stopped
    # The next caller gets the new session (booted in the background, or created by it).
    new = provider()
    assert new is not old and len(made) == 2 and provider.restarts == 1
    assert provider() is new


def test_check_replaces_only_a_dead_session() -> None:
    made, factory = counting_factory()
    provider = fake_provider(factory)
    provider()
    assert provider.check() is None  # the job failed on its own: keep the session
    assert not made[0].discarded and provider.restarts == 0
    made[0].dead_to_probe = "the Spark driver JVM does not answer"
    assert provider.check() == "the Spark driver JVM does not answer"
    assert made[0].discarded
    provider()
    assert len(made) == 2 and provider.restarts == 1


def test_check_during_the_restart_names_the_death() -> None:
    release = threading.Event()
    made: list[FakeSession] = []

    def factory() -> SparkSession:
        if made:
            release.wait(5)  # the replacement boots slowly
        made.append(FakeSession())
        return cast(SparkSession, made[-1])

    provider = fake_provider(factory)
    provider()
    made[0].dead = "the Spark driver JVM exited with status 1"
    with pytest.raises(SparkSessionLost):
        provider()
    # Until the new session is up, a concurrent failure is told why, without waiting.
    assert provider.check() == "the Spark driver JVM exited with status 1"
    release.set()
    provider()
    assert provider.check() is None and len(made) == 2


def test_stop_discards_a_dead_session_instead_of_stopping_it() -> None:
    made, factory = counting_factory()
    provider = fake_provider(factory)
    provider()
    made[0].dead = "gone"
    provider.stop()
    assert made[0].discarded and not made[0].stopped


def test_stop_during_a_boot_kills_it_without_waiting_for_it() -> None:
    booting = threading.Event()
    killed = threading.Event()
    kills: list[frozenset[int]] = []

    def booting_factory() -> SparkSession:
        booting.set()
        if killed.wait(60):  # a JVM that would take a minute to boot
            raise OSError("Java gateway process exited before sending its port number")
        return cast(SparkSession, FakeSession())

    def kill_boot(spared: frozenset[int]) -> None:
        kills.append(spared)
        killed.set()

    provider = fake_provider(booting_factory, kill_boot)
    thread = provider.start_in_background()
    assert booting.wait(5)
    started = time.monotonic()
    provider.stop()
    assert time.monotonic() - started < 5
    assert kills[0] == frozenset({1, 2})  # what ran before the boot is spared
    thread.join(5)
    assert not thread.is_alive()
    assert provider.background_error is None  # shutting down is no failure to report
    with pytest.raises(SparkProviderStopped):
        provider()


def test_a_session_that_comes_up_after_stop_is_ended_by_its_boot() -> None:
    booting = threading.Event()
    finish = threading.Event()
    made: list[FakeSession] = []

    def factory() -> SparkSession:
        booting.set()
        finish.wait(5)
        made.append(FakeSession())
        return cast(SparkSession, made[-1])

    # The kill comes too late to fail the boot: the session it made must not outlive stop().
    provider = fake_provider(factory, kill_boot=lambda spared: finish.set())
    thread = provider.start_in_background()
    assert booting.wait(5)
    provider.stop()
    assert len(made) == 1 and made[0].stopped
    thread.join(5)
    assert provider.background_error is None


def test_abort_boot_keeps_a_running_session_until_stop() -> None:
    made, factory = counting_factory()
    provider = fake_provider(factory)
    session = provider()
    provider.abort_boot()  # no boot running: nothing to kill
    assert not made[0].stopped
    assert provider() is session  # a flush under way may finish
    provider.stop()
    assert made[0].stopped and len(made) == 1
    with pytest.raises(SparkProviderStopped):
        provider()


class FakeJavaError(Py4JJavaError):
    def __init__(self, text: str) -> None:  # no JVM: the text is given
        Exception.__init__(self, text)
        self.text = text

    def __str__(self) -> str:
        return self.text


def test_error_reasons_are_one_line() -> None:
    java = FakeJavaError(
        "An error occurred while calling o49.collectToPython.\n"
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
        "reading file file:///s/vote/part-1/p.parquet.  SQLSTATE: KD001\n"
        "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n"
        "Caused by: java.io.IOException: not a Parquet file\n"
        "\tat org.apache.parquet.Baz.qux(Baz.java:2)\n"
    )
    assert spark_error_reason(java) == (
        "org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
        "reading file file:///s/vote/part-1/p.parquet.  SQLSTATE: KD001; "
        "caused by java.io.IOException: not a Parquet file"
    )
    # A message on several lines (a Python worker that would not start): all of it, up to
    # the stack trace, not "org.apache.spark.SparkException:" and nothing after it.
    worker = FakeJavaError(
        "An error occurred while calling o90.parquet.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Lost task 0.0 "
        "in stage 3.0 (TID 3) (localhost executor driver): org.apache.spark.SparkException: \n"
        "Error from python worker:\n"
        "  this python is broken\n"
        "\tat org.apache.spark.api.python.PythonWorkerFactory.startDaemon(PythonWorkerFactory.scala:1)\n"
        "\n"
        "Driver stacktrace:\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2)\n"
        "Caused by: org.apache.spark.SparkException: \n"
        "Error from python worker:\n"
        "  this python is broken\n"
        "\tat org.apache.spark.api.python.PythonWorkerFactory.startDaemon(PythonWorkerFactory.scala:1)\n"
    )
    assert spark_error_reason(worker) == (
        "org.apache.spark.SparkException: Job aborted due to stage failure: Lost task 0.0 in stage "
        "3.0 (TID 3) (localhost executor driver): org.apache.spark.SparkException: Error from "
        "python worker: this python is broken; caused by org.apache.spark.SparkException: Error "
        "from python worker: this python is broken"
    )
    assert spark_error_reason(ConnectionRefusedError(111, "Connection refused")) == (
        "ConnectionRefusedError: [Errno 111] Connection refused"
    )
    assert spark_error_reason(RuntimeError()) == "RuntimeError"
    assert len(spark_error_reason(ValueError("x" * 5000))) == 400


def test_a_python_worker_failure_is_named_by_its_cause(spark: SparkSession) -> None:
    """A failure in a Python worker comes back with the worker's traceback, as a
    PythonException or inside a Java error's text: the reason is the exception at
    its end, by its error class when it has one, not the first line of the text (it was
    "PythonException: An exception was thrown from the Python worker:", and nothing else)."""
    mismatch = (
        "PYTHON_VERSION_MISMATCH: Python in worker has different version: 3.13 than that in "
        "driver: 3.11, PySpark cannot run with different minor versions. Please check "
        "environment variables PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON are correctly set. "
        "(in a Spark Python worker)"
    )
    missing = "ModuleNotFoundError: No module named 'pyarrow' (in a Spark Python worker)"

    # Defined here, so that they are pickled by value: the workers cannot import this module.
    def raise_version_mismatch(value: int) -> int:
        from pyspark.errors import PySparkRuntimeError

        # What pyspark's worker raises when its Python is not the driver's (worker_util.py).
        raise PySparkRuntimeError(
            errorClass="PYTHON_VERSION_MISMATCH",
            messageParameters={"worker_version": "3.13", "driver_version": "3.11"},
        )

    def raise_missing_module(value: int) -> int:
        raise ModuleNotFoundError("No module named 'pyarrow'")

    for fn, reason in ((raise_version_mismatch, mismatch), (raise_missing_module, missing)):
        with pytest.raises(Exception) as frame:
            # An RDD's map, not a UDF: a UDF's worker imports pyarrow, which the Python the
            # test session's workers run (python3 on the PATH) may lack.
            spark.sparkContext.parallelize([1], 1).map(fn).collect()
        assert "Traceback" in str(frame.value)
        assert spark_error_reason(frame.value) == reason
    # The same traceback inside a Java error's text (as a job's failure reaches a caller of
    # the JVM that pyspark does not convert): its Python cause, not its first Java line.
    java = FakeJavaError(
        "An error occurred while calling o82.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage "
        "3.0 failed 4 times, most recent failure: Lost task 0.3 in stage 3.0 (TID 9) "
        "(127.0.0.1 executor 0): org.apache.spark.api.python.PythonException: Traceback (most "
        "recent call last):\n"
        '  File "/venv/pyspark/worker.py", line 2845, in read_udfs\n'
        "    import pyarrow as pa\n"
        "ModuleNotFoundError: No module named 'pyarrow'\n"
        "\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
    )
    assert spark_error_reason(java) == missing


def test_a_spark_error_class_names_the_error(spark: SparkSession, tmp_path: Any) -> None:
    with pytest.raises(Exception) as frame:
        spark.read.parquet(str(tmp_path / "nothing-here")).collect()
    reason = spark_error_reason(frame.value)
    assert reason.startswith("PATH_NOT_FOUND: Path does not exist: file:"), reason
    assert "nothing-here" in reason and "\n" not in reason


def test_the_driver_jit_stops_at_c1(spark: SparkSession) -> None:
    """The session's driver JVM runs with C1 only (session.SERVER_DEFAULTS says why): read
    from the JVM's own input arguments, not from the settings passed."""
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # type: ignore[union-attr]
    assert "-XX:TieredStopAtLevel=1" in list(bean.getInputArguments())
