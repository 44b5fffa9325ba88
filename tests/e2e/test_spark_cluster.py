"""pomoview on a real Spark standalone cluster, as the README's "Running on a Spark cluster"
runs it: a master and a one-core worker on loopback from the venv's own pyspark, and the
server with `--spark-master spark://...`, `--spark-conf` settings and `PYSPARK_PYTHON`.

The vote example, a bulk load, cold lookups (keyed Spark jobs on the worker's executor) and a
restart answer exactly; then the worker is killed while a cold lookup waits on its job (the
job stalled from inside Spark, so that the kill lands during it): the lookup gets UNAVAILABLE
naming the cluster and that it has no executors within seconds, not at the 300 s deadline;
Stats, the metrics and the health service say so; keys in memory still answer and writes
are still accepted. A new worker registers, and the server answers again by itself.
"""

from __future__ import annotations

import csv
import random
import re
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from pomoview.client import Client, Unavailable

from .server_process import VOTES, ServerProcess, wait_for_flush
from .spark_cluster import SparkCluster
from .votes_model import VotesModel

VIEW = "articleWithVotes"
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPARK_HEALTH = "pomoview.spark"
# The lookup of a cluster without executors must fail within this many seconds of the kill
# (the server's grace is 3 s, and the executor's loss is seen within a second).
FAIL_FAST = 15.0


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> SparkCluster:
    """A master and one one-core worker on loopback; every process it started is stopped at
    the end, whatever the test did."""
    spark = SparkCluster(tmp_path / "cluster")
    spark.folder.mkdir()
    request.addfinalizer(spark.stop)
    spark.start_master()
    # Not waited for: it registers while the server's JVM boots (which waits for its executor).
    spark.start_worker(cores=1, wait=False)
    return spark


@pytest.fixture
def servers(request: pytest.FixtureRequest) -> Callable[..., ServerProcess]:
    """Starts servers on the cluster; each is killed at the end if it still runs."""
    started: list[ServerProcess] = []

    def kill_leftovers() -> None:
        for server in started:
            if server.process is not None and server.process.poll() is None:
                server.kill()

    request.addfinalizer(kill_leftovers)

    def start(data: Path, cluster: SparkCluster | None, stall: Path) -> ServerProcess:
        """A server on `cluster`, or in local mode (local[2]) for None."""
        on_cluster = [
            "--spark-master", cluster.url,
            "--spark-conf", "spark.cores.max=1",
            "--spark-conf", "spark.executor.memory=512m",
            # JVMs that start faster (the tests' driver and executors do little, and briefly).
            "--spark-conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
            "--spark-conf", f"spark.driver.extraJavaOptions={FAST_JVM}",
        ] if cluster is not None else []
        server = ServerProcess(
            data,
            program=VOTES,
            flush_interval=0.5,
            # A deadline well under the test's waits: a lookup that waited for it instead of
            # failing fast would fail the test with DEADLINE_EXCEEDED, not hang it.
            extra_args=[*on_cluster, "--metrics-port", "0", "--spark-timeout", "30"],
            env={
                # The executors' Python: the driver's (the same minor version, with pyarrow).
                "PYSPARK_PYTHON": sys.executable,
                # Unset: the driver's address must come from --host, as the server defaults it.
                "SPARK_LOCAL_IP": None,
                "POMOVIEW_TEST_STALL_SPARK": str(stall),
            },
        )
        started.append(server)
        return server.start()

    return start


def spark_status(db: Client) -> dict[str, object]:
    spark = db.stats()["spark"]
    assert isinstance(spark, dict)
    return spark


def wait_for_executors(db: Client, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (spark := spark_status(db))["executors"] < 1:  # type: ignore[operator]
        assert time.monotonic() < deadline, f"no executor registered: {spark}"
        time.sleep(0.1)


def health(server: ServerProcess) -> int:
    with grpc.insecure_channel(server.address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SPARK_HEALTH), timeout=10
        )
    return int(reply.status)


def metric(server: ServerProcess, name: str) -> float:
    found = re.findall(r"metrics at (http://\S+)", server.log_path.read_text())
    assert found, "the server did not log its metrics URL"
    text = urllib.request.urlopen(found[-1], timeout=10).read().decode()  # the last start's
    [value] = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(value)


def check(db: Client, model: VotesModel, ids: list[int], min_epoch: int | None = None) -> None:
    answers = db.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=min_epoch)
    assert {k[0]: list(rows) for k, rows in answers.items()} == {i: model.view(i) for i in ids}


def vote_file(path: Path, model: VotesModel, rows: int, articles: int) -> Path:
    """`rows` distinct votes over the articles, as a CSV file the cluster's executor reads
    (the same path on every node: here, one machine)."""
    rng = random.Random(22)
    votes = [{"article_id": rng.randrange(1, articles + 1), "user_id": 1000 + n} for n in range(rows)]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, ["article_id", "user_id"])
        writer.writeheader()
        writer.writerows(votes)
    model.apply("vote", votes, [])
    return path


def run_on_cluster(
    cluster: SparkCluster | None,
    servers: Callable[..., ServerProcess],
    root: Path,
    *,
    votes: int,
    articles: int,
) -> dict[str, float]:
    """The whole scenario; returns the time each phase took (seconds), which the test prints.
    With no cluster (local mode, for comparison), the phases of the worker's death are left
    out."""
    times: dict[str, float] = {}
    stall = root / "stall"
    stall.mkdir()
    model = VotesModel()
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        times[name] = now - clock
        clock = now

    server = servers(root / "data", cluster, stall)
    log = server.log_path.read_text()
    if cluster is not None:
        assert "spark.driver.host=127.0.0.1 (from --host)" in log
        assert "spark.cores.max=1 (flag)" in log
    with server.client() as db:
        wait_for_executors(db)
        lap("start")
        # The vote example (README's Quickstart), then a bulk load read by the executor.
        titles = [{"id": i, "title": f"article {i}"} for i in range(1, articles + 1)]
        db.write("article", insert=titles)
        model.apply("article", titles, [])
        hand = [{"article_id": 1, "user_id": 7}, {"article_id": 1, "user_id": 8}]
        epoch = db.write("vote", insert=hand)
        model.apply("vote", hand, [])
        assert db.lookup(VIEW, {"id": 1}, min_epoch=epoch) == model.view(1)
        rows, epoch = db.load("vote", vote_file(root / "votes.csv", model, votes, articles))
        assert rows == votes
        wait_for_flush(db, epoch)
        lap("load")
        check(db, model, list(range(1, articles + 1)))  # cold: keyed jobs on the executor
        jobs = db.stats()["spark_jobs"]
        assert isinstance(jobs, int) and jobs > 0
        lap("lookups")
    assert server.stop() == 0
    server.start()
    with server.client() as db:
        wait_for_executors(db)
        check(db, model, [1, 2, 3])  # cold again, from the store on the cluster
        lap("restart")
        if cluster is not None:
            lose_and_replace_the_worker(cluster, server, db, model, stall, articles, lap)
            times["(the lookup failed after the kill)"] = cluster.failed_after
        durable = db.stats()["durable_epoch"]
        assert isinstance(durable, int)
        # Cold keys (the last one written to while the worker was gone), through Spark again.
        check(db, model, [4, articles - 1, articles], min_epoch=durable)
        lap("recovered")
    assert server.stop() == 0
    return times


def lose_and_replace_the_worker(
    cluster: SparkCluster,
    server: ServerProcess,
    db: Client,
    model: VotesModel,
    stall: Path,
    articles: int,
    lap: Callable[[str], None],
) -> None:
    kill_during_a_cold_lookup(cluster, server, db, model, stall, articles)
    lap("worker killed")
    cluster.start_worker(cores=1)
    wait_for_executors(db)
    assert health(server) == health_pb2.HealthCheckResponse.SERVING
    assert metric(server, "pomoview_spark_executors") == 1
    lap("new worker")


def kill_during_a_cold_lookup(
    cluster: SparkCluster, server: ServerProcess, db: Client, model: VotesModel, stall: Path, articles: int
) -> None:
    """Kills the only worker while a cold lookup's Spark job runs; checks what the client
    gets, and what the server says while it has no executor."""
    (stall / "fetch").write_text("600")  # the job sleeps in its task, on the executor
    tasks = cluster.tasks_started()
    outcome: list[BaseException | object] = []
    lookup = threading.Thread(target=lambda: outcome.append(_lookup_or_error(db, articles)))
    lookup.start()
    deadline = time.monotonic() + 60
    while cluster.tasks_started() == tasks:  # the lookup's job has a task on the executor
        assert time.monotonic() < deadline and lookup.is_alive(), outcome
        time.sleep(0.05)
    killed = time.monotonic()
    cluster.kill_worker(cluster.workers[-1])
    lookup.join(timeout=120)
    failed_after = time.monotonic() - killed
    [error] = outcome
    assert isinstance(error, Unavailable), error
    message = str(error)
    assert f"the Spark cluster {cluster.url} has had no executor" in message, message
    assert "the upquery on source" in message
    assert failed_after < FAIL_FAST, f"the lookup failed only {failed_after:.1f} s after the kill"
    cluster.failed_after = failed_after
    (stall / "fetch").unlink()
    # While there is no executor: said by Stats, the metrics and health; a later lookup that
    # needs Spark fails at once; keys in memory answer, writes are accepted.
    spark = spark_status(db)
    assert spark["executors"] == 0 and "has had no executor" in str(spark["status"]), spark
    assert metric(server, "pomoview_spark_executors") == 0
    assert health(server) == health_pb2.HealthCheckResponse.NOT_SERVING
    started = time.monotonic()
    with pytest.raises(Unavailable, match="has had no executor"):
        db.lookup(VIEW, {"id": articles - 1})
    assert time.monotonic() - started < 5
    assert db.lookup(VIEW, {"id": 1}) == model.view(1)  # warm since the restart
    vote = {"article_id": articles, "user_id": 1}
    db.write("vote", insert=[vote])
    model.apply("vote", [vote], [])


def _lookup_or_error(db: Client, article: int) -> object:
    try:
        return db.lookup(VIEW, {"id": article})
    except Exception as err:  # noqa: BLE001 (the test asserts what it was)
        return err


def test_a_cluster_serves_loses_its_worker_and_recovers(
    cluster: SparkCluster, servers: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    started = time.monotonic()
    times = run_on_cluster(cluster, servers, tmp_path, votes=2_000, articles=20)
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    print(f"\ncluster test: {time.monotonic() - started:.1f} s; {phases}")


@pytest.mark.slow
def test_the_same_scenario_in_local_mode(servers: Callable[..., ServerProcess], tmp_path: Path) -> None:
    """For comparison: the cluster test's phases in local mode (local[2]), without the
    worker's death."""
    started = time.monotonic()
    times = run_on_cluster(None, servers, tmp_path, votes=2_000, articles=20)
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    print(f"\nlocal mode: {time.monotonic() - started:.1f} s; {phases}")


@pytest.mark.slow
def test_a_cluster_at_scale(
    cluster: SparkCluster, servers: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """As above with 200,000 votes and 1,000 articles: lookups of more than 256 keys at once,
    a load of many tasks on one core."""
    started = time.monotonic()
    times = run_on_cluster(cluster, servers, tmp_path, votes=200_000, articles=1_000)
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
    print(f"\ncluster test (slow): {time.monotonic() - started:.1f} s; {phases}")
