"""A real Spark standalone cluster on loopback for end-to-end tests: a master and workers
started from the venv's own pyspark (`bin/spark-class`), as the README's "Running on a Spark
cluster" says to. Each process runs in its own process group, so that stopping it also
stops what it started (a worker's executors and their Python workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    # No REST submission server (it takes port 6066, which two test runs would share).
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
    # JVMs that start faster: the master and workers of a test do little, and briefly.
    env["SPARK_DAEMON_JAVA_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    return env


def _wait_for_line(log: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while needle not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            raise RuntimeError(f"{log.name}: exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{log.name}: no {needle!r} in {timeout:g} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stops `proc`'s process group: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group's other members, too
    proc.wait(timeout=30)


class SparkCluster:
    """A standalone master on 127.0.0.1 and its workers, their logs and work folders in
    `folder`. `stop()` ends every process it started."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.failed_after = 0.0  # a test's record: seconds from a worker's kill to a failed lookup

    def _spawn(self, name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.folder / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT, env=_env(),
                start_new_session=True,  # its own process group, killed whole
            )
        return proc, log

    def start_master(self, timeout: float = 60.0) -> None:
        self.master, log = self._spawn(
            "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0"]
        )
        _wait_for_line(log, "I have been elected leader", self.master, timeout)

    def start_worker(
        self, cores: int = 1, memory: str = "1g", timeout: float = 60.0, wait: bool = True
    ) -> subprocess.Popen[bytes]:
        """Starts a worker; waits until it has registered with the master, if `wait`."""
        number = len(self.workers)
        work = self.folder / f"worker{number}"
        work.mkdir()
        proc, log = self._spawn(
            f"worker{number}",
            [WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
             "--webui-port", "0", "--work-dir", str(work), self.url],
        )
        self.workers.append(proc)
        if wait:
            _wait_for_line(log, "Successfully registered with master", proc, timeout)
        return proc

    def tasks_started(self) -> int:
        """Tasks the executors of every worker have started so far (from their logs)."""
        return sum(
            log.read_text(errors="replace").count("Running task ")
            for log in self.folder.glob("worker*/app-*/*/stderr")
        )

    def kill_worker(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL to the worker's whole group: the worker and its executors die at once, as
        when their machine goes away."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for proc in [*self.workers, *([self.master] if self.master else [])]:
            stop_group(proc)
