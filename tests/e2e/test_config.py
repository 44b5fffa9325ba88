"""`pomoview serve` configuration: flags, then environment variables, then defaults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pomoview.server.cli.commands import (
    SERVE_ENV,
    UsageError,
    build_parser,
    main,
    resolve_serve_config,
    spark_nice,
    spark_timeout,
)

from .server_process import VOTES, ServerProcess, child_pids, comm, thread_niceness, wait_for_flush
from .votes_model import VotesModel


def test_a_flag_wins_over_the_environment_which_wins_over_the_default() -> None:
    parser = build_parser()
    env = {"POMOVIEW_STORE": "/env/store", "POMOVIEW_SPARK_MASTER": "spark://env:7077"}
    args = parser.parse_args(["serve", "--spark-master", "local[3]"])
    assert resolve_serve_config(args, env) == {
        "data": ("./data", "default"),
        "store": ("/env/store", "env POMOVIEW_STORE"),
        "spark_master": ("local[3]", "flag"),
        "spark_nice": ("10", "default"),
        "metrics_port": ("", "default"),  # "": no metrics endpoint
        "memory_budget": ("", "default"),  # "": resolved to a share of the machine at start
        "spark_timeout": ("300", "default"),
        "spark_write_timeout": ("3600", "default"),
        "tls_cert": ("", "default"),
        "tls_key": ("", "default"),
        "tls_client_ca": ("", "default"),
        "max_message_bytes": ("64M", "default"),
        "max_program_bytes": ("1M", "default"),
        "max_rules": ("10000", "default"),
        "max_rule_atoms": ("1000", "default"),
        "max_plan_depth": ("20000", "default"),
        "max_lookup_keys": ("100000", "default"),
        "max_write_rows": ("100000", "default"),
    }
    args = parser.parse_args(["serve", "--store", "file:///flag/store", "--data", "d"])
    assert resolve_serve_config(args, env)["store"] == ("file:///flag/store", "flag")
    args = parser.parse_args(["serve"])
    assert resolve_serve_config(args, {"POMOVIEW_STORE": ""})["store"] == ("", "default")
    assert resolve_serve_config(args, {})["spark_master"] == ("local[*]", "default")
    assert resolve_serve_config(args, {"POMOVIEW_MEMORY_BUDGET": "64M"})["memory_budget"] == (
        "64M",
        "env POMOVIEW_MEMORY_BUDGET",
    )
    args = parser.parse_args(["serve", "--max-lookup-keys", "50"])
    config = resolve_serve_config(args, {"POMOVIEW_MAX_LOOKUP_KEYS": "7", "POMOVIEW_MAX_WRITE_ROWS": "9"})
    assert config["max_lookup_keys"] == ("50", "flag")
    assert config["max_write_rows"] == ("9", "env POMOVIEW_MAX_WRITE_ROWS")


def test_spark_nice_is_a_niceness_from_the_flag_or_the_environment() -> None:
    parser = build_parser()

    def resolved(argv: list[str], env: dict[str, str]) -> int:
        return spark_nice(resolve_serve_config(parser.parse_args(["serve", *argv]), env))

    assert resolved([], {}) == 10
    assert resolved(["--spark-nice", "0"], {"POMOVIEW_SPARK_NICE": "7"}) == 0
    assert resolved([], {"POMOVIEW_SPARK_NICE": "19"}) == 19
    for bad in ("20", "-1", "low", "1.5", ""):
        with pytest.raises(UsageError, match="--spark-nice: expected a niceness from 0 to 19"):
            resolved(["--spark-nice", bad], {})
    with pytest.raises(UsageError, match="env POMOVIEW_SPARK_NICE: expected a niceness.*'x'"):
        resolved([], {"POMOVIEW_SPARK_NICE": "x"})


def test_spark_timeouts_are_seconds_and_zero_is_none() -> None:
    parser = build_parser()

    def resolved(argv: list[str], env: dict[str, str]) -> tuple[float | None, float | None]:
        config = resolve_serve_config(parser.parse_args(["serve", *argv]), env)
        return spark_timeout(config, "spark_timeout"), spark_timeout(config, "spark_write_timeout")

    assert resolved([], {}) == (300.0, 3600.0)
    assert resolved(["--spark-timeout", "2.5"], {"POMOVIEW_SPARK_TIMEOUT": "9"}) == (2.5, 3600.0)
    assert resolved([], {"POMOVIEW_SPARK_WRITE_TIMEOUT": "0"}) == (300.0, None)
    for bad in ("-1", "soon", "inf", "nan"):
        with pytest.raises(UsageError, match="--spark-timeout: expected seconds"):
            resolved(["--spark-timeout", bad], {})
    with pytest.raises(UsageError, match="env POMOVIEW_SPARK_WRITE_TIMEOUT: expected seconds.*'x'"):
        resolved([], {"POMOVIEW_SPARK_WRITE_TIMEOUT": "x"})


def test_serve_help_documents_each_setting_with_its_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # undo the wrapping
    flags = ("--data", "--store", "--spark-master", "--spark-nice", "--host", "--port", "--flush-interval")
    flags += ("--token-file", "--tls-cert", "--tls-key", "--tls-client-ca", "--insecure")
    flags += ("--max-message-bytes", "--max-program-bytes", "--max-rules", "--max-rule-atoms")
    flags += ("--max-plan-depth", "--max-lookup-keys", "--max-write-rows")
    for flag in flags:
        assert flag in text
    for var, _default in SERVE_ENV.values():
        assert f"env {var}" in text
    assert "env POMOVIEW_TOKEN: the token itself" in text  # not in SERVE_ENV: it is no file name
    assert "default local[*]" in text and "default DIR/store" in text
    assert "(env POMOVIEW_MAX_LOOKUP_KEYS, default 100000)" in text
    assert "(env POMOVIEW_MAX_MESSAGE_BYTES, default 64M)" in text


def _serve(data: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("POMOVIEW_")}
    return subprocess.run(
        [sys.executable, "-m", "pomoview.server.cli", "serve", "--data", str(data), "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=180,  # a store URI opens through the Spark JVM, which boots first
        env={**clean, **env},
    )


def test_a_bad_limit_is_refused_at_start(tmp_path: Path) -> None:
    done = _serve(tmp_path / "data", "--max-lookup-keys", "0", env={})
    assert done.returncode == 2
    assert "pomoview: --max-lookup-keys: a limit must be positive, got '0'" in done.stderr, done.stderr
    done = _serve(tmp_path / "data", env={"POMOVIEW_MAX_PROGRAM_BYTES": "lots"})
    assert done.returncode == 2
    assert "env POMOVIEW_MAX_PROGRAM_BYTES: expected a size in bytes" in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was written


def test_a_store_spark_cannot_be_used_for_is_refused_at_start(tmp_path: Path) -> None:
    # Not a path nor an absolute URI: refused before Spark starts.
    done = _serve(tmp_path / "data", env={"POMOVIEW_STORE": "s3a:bucket/store"})
    assert done.returncode == 2
    assert "'s3a:bucket/store'" in done.stderr and "must be absolute" in done.stderr, done.stderr
    # A URI goes to Spark's Hadoop client, which names what it lacks (here a file system for
    # the scheme; for s3a:// without the hadoop-aws jars, its class).
    done = _serve(tmp_path / "data2", env={"POMOVIEW_STORE": "nosuchfs://bucket/store"})
    assert done.returncode == 2
    assert 'No FileSystem for scheme "nosuchfs"' in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_the_store_location_comes_from_the_environment_or_a_flag(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env_store = tmp_path / "env store"  # a space, to exercise the URI's quoting
    model = VotesModel()
    server = ServerProcess(
        data,
        program=VOTES,
        flush_interval=0.5,
        # POMOVIEW_SPARK_NICE unset (conftest.py sets it for the rest of the run): the default.
        env={"POMOVIEW_STORE": env_store.as_uri(), "POMOVIEW_SPARK_NICE": None},
    ).start()
    try:
        with server.client() as db:
            articles = [{"id": i, "title": f"t{i}"} for i in range(5)]
            db.write("article", insert=articles)
            model.apply("article", articles, [])
            votes = [{"article_id": 1, "user_id": u} for u in range(3)]
            epoch = db.write("vote", insert=votes)
            model.apply("vote", votes, [])
            wait_for_flush(db, epoch)
            # The Spark driver JVM (the server's child) runs 10 steps below the server's
            # CPU priority, `serve --spark-nice`'s default: every thread of it.
            assert server.process is not None
            served = thread_niceness(server.process.pid)
            assert len(set(served.values())) == 1, served
            (jvm,) = (pid for pid in child_pids(server.process.pid) if comm(pid) == "java")
            assert set(thread_niceness(jvm).values()) == {min(19, next(iter(served.values())) + 10)}
    finally:
        server.stop()
    for source in ("article", "vote"):
        assert list((env_store / source).glob("part-*/*.parquet")), source
    assert (env_store / "manifest.json").exists()
    assert not (data / "store").exists()
    log = server.log_path.read_text()
    assert f"store={env_store.as_uri()} (env POMOVIEW_STORE)" in log

    # The flag wins over the variable: the server reads the store the flag names.
    elsewhere = tmp_path / "elsewhere"
    server = ServerProcess(
        data,
        flush_interval=0.5,
        extra_args=["--store", str(env_store), "--spark-nice", "0"],
        env={"POMOVIEW_STORE": str(elsewhere), "POMOVIEW_SPARK_NICE": "5"},  # the flag wins
    ).start()
    try:
        with server.client() as db:
            assert db.lookup("articleWithVotes", {"id": 1}) == model.view(1)  # from Parquet
            assert server.process is not None  # --spark-nice 0: the JVM at the server's priority
            (jvm,) = (pid for pid in child_pids(server.process.pid) if comm(pid) == "java")
            assert set(thread_niceness(jvm).values()) == set(thread_niceness(server.process.pid).values())
    finally:
        server.stop()
    assert not elsewhere.exists()
    assert f"store={env_store.as_uri()} (flag)" in server.log_path.read_text()

    # The data folder remembers its store: its log holds only what that store lacks.
    done = _serve(data, env={})
    assert done.returncode == 2
    assert f"was last used with the store {env_store}" in done.stderr, done.stderr


def test_serve_defaults_to_the_servers_own_apply_lag_bound() -> None:
    """The command line names the bound's default for `--help` without importing the
    scheduler (a client command stays light); it must be the applier's."""
    from pomoview.server.scheduler.applier import DEFAULT_MAX_APPLY_LAG

    assert build_parser().parse_args(["serve"]).max_apply_lag == DEFAULT_MAX_APPLY_LAG
