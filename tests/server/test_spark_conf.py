"""Spark settings for the session (`serve --spark-conf`, POMOVIEW_SPARK_CONF, DATA/spark.conf),
the driver's address on a cluster, and a failure that repeats logged with a count."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pomoview.server.spark.conf import SparkConf, SparkConfError, driver_address_defaults, resolve_spark_conf
from pomoview.server.spark.failure_log import FailureLog


def test_a_flag_wins_over_the_variable_which_wins_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "spark.conf").write_text(
        "# executors\n"
        "spark.executor.memory   2g\n"
        "spark.cores.max=4\n"
        "\n"
        "spark.driver.extraJavaOptions -Da=b -Dc=d\n"
    )
    conf = resolve_spark_conf(
        tmp_path,
        ["spark.cores.max=1", "spark.executorEnv.TZ=UTC"],
        {"POMOVIEW_SPARK_CONF": "spark.executor.memory=1g; spark.cores.max=2"},
    )
    assert conf.values == {
        "spark.executor.memory": "1g",
        "spark.cores.max": "1",
        "spark.driver.extraJavaOptions": "-Da=b -Dc=d",
        "spark.executorEnv.TZ": "UTC",
    }
    assert conf.origins == {
        "spark.executor.memory": "env POMOVIEW_SPARK_CONF",
        "spark.cores.max": "flag",
        "spark.driver.extraJavaOptions": f"{tmp_path / 'spark.conf'}:5",
        "spark.executorEnv.TZ": "flag",
    }
    assert resolve_spark_conf(tmp_path / "none", [], {}).values == {}


@pytest.mark.parametrize(
    ("flags", "env", "file", "message"),
    [
        (["spark.cores.max"], "", "", "--spark-conf: expected KEY=VALUE, got 'spark.cores.max'"),
        (["executor.memory=2g"], "", "", "--spark-conf: 'executor.memory' is not a Spark setting"),
        (["spark.master=local[2]"], "", "", "set spark.master with --spark-master"),
        ([], "spark.ok=1;=2", "", "env POMOVIEW_SPARK_CONF: expected KEY=VALUE, got '=2'"),
        ([], "", "spark.ok 1\nnonsense\n", "spark.conf:2: expected KEY=VALUE, got 'nonsense'"),
    ],
)
def test_a_bad_setting_is_refused_naming_where_it_was(
    tmp_path: Path, flags: list[str], env: str, file: str, message: str
) -> None:
    (tmp_path / "spark.conf").write_text(file)
    with pytest.raises(SparkConfError, match=message.replace("[", r"\[").replace("]", r"\]")):
        resolve_spark_conf(tmp_path, flags, {"POMOVIEW_SPARK_CONF": env})


def test_on_a_cluster_the_driver_is_where_the_server_listens() -> None:
    conf = SparkConf()
    assert driver_address_defaults("spark://10.0.0.5:7077", "10.0.0.9", conf) is None
    assert conf.values == {"spark.driver.host": "10.0.0.9", "spark.driver.bindAddress": "10.0.0.9"}
    # Loopback, with a master on loopback (the tests' cluster, a laptop's).
    conf = SparkConf()
    assert driver_address_defaults("spark://127.0.0.1:7077", "127.0.0.1", conf) is None
    assert conf.values["spark.driver.host"] == "127.0.0.1"
    # An explicit setting wins.
    conf = SparkConf()
    conf.set("spark.driver.host", "10.0.0.7", "flag")
    assert driver_address_defaults("spark://10.0.0.5:7077", "10.0.0.9", conf) is None
    assert conf.values == {"spark.driver.host": "10.0.0.7", "spark.driver.bindAddress": "10.0.0.9"}
    # Local mode: the session binds loopback itself.
    conf = SparkConf()
    assert driver_address_defaults("local[2]", "10.0.0.9", conf) is None and not conf.values
    # Left unset, and said why, when --host is no address the executors could use.
    for master, host, why in (
        ("spark://10.0.0.5:7077", "0.0.0.0", "--host 0.0.0.0 is every address"),
        ("spark://10.0.0.5:7077", "myhost", "--host myhost is not an IP address"),
        ("spark://spark-master:7077", "127.0.0.1", "--host 127.0.0.1 is loopback and the master"),
    ):
        conf = SparkConf()
        note = driver_address_defaults(master, host, conf)
        assert note is not None and why in note and "spark.driver.host=ADDRESS" in note
        assert not conf.values


def test_a_repeated_failure_is_logged_once_then_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("pomoview.test_failure_log")
    caplog.set_level(logging.INFO, log.name)
    failures = FailureLog(log, "a flush")
    # The same failure names another stage each time: still the same reason.
    logged = [failures.failed(f"MISMATCH (stage {n}.0)", f"; at version {n}") for n in range(1, 10)]
    assert logged == [True, True, False, True, False, False, False, True, False]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "a flush failed: MISMATCH (stage 1.0); at version 1"
    assert messages[1].startswith("a flush failed again, 2 times since ")
    assert messages[3].startswith("a flush failed again, 8 times since ")
    for stage in range(10, 16):
        assert not failures.failed(f"MISMATCH (stage {stage}.0)")
    assert failures.failed("MISMATCH (stage 16.0)")  # the 16th time
    assert caplog.records[-1].getMessage().startswith("a flush failed again, 16 times since ")
    # Cut to a length, a longer number moves the cut: still the same reason.
    long = "x" * 380
    assert failures.failed(f"{long} (stage 1.0) end")  # another reason: logged at once
    assert failures.failed(f"{long} (stage 10.0) en")  # the 2nd time
    assert failures.failed("No space left on device")  # another reason: logged at once
    failures.succeeded()
    last = caplog.records[-1].getMessage()
    assert last == "a flush succeeded, after failing 1 time: No space left on device"
    assert not any(r.exc_info for r in caplog.records)
