"""Starts the real `pomoview serve` process on a free port of 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pomoview.client import Client

REPO = Path(__file__).resolve().parents[2]
VOTES = REPO / "examples" / "votes.pomo"


class ServerProcess:
    """One server process over `data_dir`; `address` is set once it listens."""

    def __init__(
        self,
        data_dir: Path,
        program: Path | None = None,
        flush_interval: float = 1.0,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str | None] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.program = program
        self.flush_interval = flush_interval
        self.extra_args = list(extra_args)  # more `serve` flags
        # Added to (and overriding) this process's environment; None removes a variable.
        self.env = dict(env or {})
        self.process: subprocess.Popen[str] | None = None
        self.address = ""
        self.log_path = data_dir.parent / f"{data_dir.name}-server.log"

    def start(self, timeout: float = 120.0) -> ServerProcess:
        args = [
            sys.executable,
            "-m",
            "pomoview.server.cli",
            "serve",
            "--data",
            str(self.data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--spark-master",
            "local[2]",
            "--flush-interval",
            str(self.flush_interval),
        ]
        if self.program is not None:
            args += ["--program", str(self.program)]
        args += self.extra_args
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={
                k: v
                for k, v in {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}.items()
                if v is not None
            },
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(
                    f"server exited ({self.process.wait()}); log:\n{self.log_path.read_text()[-4000:]}"
                )
            if line.startswith("pomoview listening on "):
                self.address = line.split()[-1]
                return self
        raise TimeoutError("server did not start listening")

    def client(self, **options: Any) -> Client:
        """A client of this server; `options` are Client's (token=, root_certificates=, ...)."""
        return Client(self.address, timeout=120.0, **options)

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM: the server exits cleanly (a Spark JVM still booting is killed, not waited for)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush or close anything."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)


def wait_for_flush(client: Client, epoch: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while client.stats()["flushed_epoch"] < epoch:  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"epoch {epoch} was not flushed to Parquet in time")
        time.sleep(0.2)


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def child_pids(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def thread_niceness(pid: int) -> dict[int, int]:
    """Each thread of `pid` and its niceness (field 19 of its stat line)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended between the listing and the read
            continue
        out[int(task.name)] = int(stat[stat.rindex(")") + 2 :].split()[16])
    return out
