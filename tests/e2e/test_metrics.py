"""`pomoview serve --metrics-port`: the real server process, scraped over HTTP as Prometheus
would, while writes, cold and warm lookups and flushes go through it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pomoview.server.cli.commands import UsageError, build_parser, metrics_port, resolve_serve_config

from .server_process import VOTES, ServerProcess

VIEW = "articleWithVotes"
Samples = dict[str, float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, server: ServerProcess, url: str) -> None:
        self.server = server
        self.url = url

    def scrape(self) -> Samples:
        """Every sample, keyed by its name and labels as Prometheus's text format shows them."""
        with urllib.request.urlopen(self.url, timeout=30) as response:
            text = response.read().decode()
        out: Samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
        return out

    def wait_for(self, check: Callable[[Samples], bool], timeout: float = 120.0) -> Samples:
        deadline = time.monotonic() + timeout
        while True:
            samples = self.scrape()
            if check(samples) or time.monotonic() > deadline:
                return samples
            time.sleep(0.2)


def test_the_metrics_port_comes_from_a_flag_or_the_environment_and_is_off_by_default() -> None:
    parser = build_parser()

    def port(argv: list[str], env: dict[str, str]) -> int | None:
        return metrics_port(resolve_serve_config(parser.parse_args(["serve", *argv]), env))

    assert port([], {}) is None
    assert port([], {"POMOVIEW_METRICS_PORT": "9464"}) == 9464
    assert port(["--metrics-port", "9000"], {"POMOVIEW_METRICS_PORT": "9464"}) == 9000
    with pytest.raises(UsageError, match="--metrics-port: expected a port number"):
        port(["--metrics-port", "http"], {})
    with pytest.raises(UsageError, match="env POMOVIEW_METRICS_PORT: expected a port number"):
        port([], {"POMOVIEW_METRICS_PORT": "70000"})


def test_a_metrics_port_in_use_is_refused_before_spark_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pomoview.server.cli",
                "serve",
                "--data",
                str(tmp_path / "data"),
                "--port",
                "0",
                "--metrics-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "Spark" not in done.stderr, done.stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = Path(tmp_path_factory.mktemp("metrics")) / "data"
    port = free_port()
    server = ServerProcess(
        data, program=VOTES, flush_interval=0.5, extra_args=["--metrics-port", str(port)]
    ).start()
    try:
        yield Served(server, f"http://127.0.0.1:{port}/metrics")
    finally:
        server.stop()


def test_the_address_is_logged_and_every_metric_is_there_before_any_traffic(served: Served) -> None:
    assert f"metrics at {served.url}" in served.server.log_path.read_text()
    time.sleep(3 * served.server.flush_interval)  # flushes with nothing to move are not timed
    samples = served.scrape()
    assert samples["pomoview_flush_seconds_count"] == 0
    for name in (
        "pomoview_lookups_total",
        "pomoview_lookup_hits_total",
        "pomoview_lookup_misses_total",
        "pomoview_write_batches_total",
        "pomoview_write_rows_total",
        "pomoview_epochs_committed_total",
        "pomoview_dropped_deltas_total",
        "pomoview_applied_epoch",
        "pomoview_durable_epoch",
        "pomoview_flushed_epoch",
        "pomoview_partial_state_bytes",
        f'pomoview_state_keys{{view="{VIEW}"}}',
        f'pomoview_state_rows{{view="{VIEW}"}}',
        f'pomoview_state_bytes{{view="{VIEW}"}}',
        "pomoview_upquery_seconds_count",
        "pomoview_spark_job_seconds_count",
        "pomoview_wal_fsync_seconds_count",
        "pomoview_flush_seconds_count",
        "pomoview_compaction_seconds_count",
        "process_resident_memory_bytes",
    ):
        assert name in samples, name


def test_writes_lookups_and_flushes_move_their_metrics(served: Served) -> None:
    before = served.scrape()
    with served.server.client() as db:
        db.write("article", insert=[{"id": 1, "title": "Hello"}, {"id": 2, "title": "World"}])
        epoch = db.write("vote", insert=[{"article_id": 1, "user_id": u} for u in (7, 8, 9)])
        after_writes = served.scrape()

        cold = db.lookup(VIEW, {"id": 1}, min_epoch=epoch)
        assert cold == [{"id": 1, "title": "Hello", "votes": 3}]
        after_cold = served.scrape()
        warm = db.lookup(VIEW, {"id": 1})
        assert warm == cold
        after_warm = served.scrape()

    def moved(samples: Samples, name: str, since: Samples = before) -> float:
        return samples[name] - since[name]

    # Writes: two batches, five rows, two epochs, each fsynced in the log before it returned.
    assert moved(after_writes, "pomoview_write_batches_total") == 2
    assert moved(after_writes, "pomoview_write_rows_total") == 5
    assert moved(after_writes, "pomoview_epochs_committed_total") == 2
    assert after_writes["pomoview_durable_epoch"] == epoch
    assert after_writes["pomoview_wal_fsync_seconds_count"] > 0
    assert after_writes["pomoview_wal_fsync_seconds_sum"] > 0

    # The cold lookup missed: an upquery, with its Spark jobs (one per source it read).
    assert moved(after_cold, "pomoview_lookups_total") == 1
    assert moved(after_cold, "pomoview_lookup_misses_total") == 1
    assert moved(after_cold, "pomoview_lookup_hits_total") == 0
    assert moved(after_cold, "pomoview_upquery_seconds_count") == 1
    assert moved(after_cold, "pomoview_upquery_seconds_sum") > 0
    assert moved(after_cold, "pomoview_spark_job_seconds_count") >= 1
    assert after_cold["pomoview_applied_epoch"] >= epoch

    # Its rounds held the dataflow lock on a gRPC thread; the writes' steps on the apply's.
    grpc_holds = 'pomoview_dataflow_lock_hold_seconds_count{holder="grpc"}'  # a child from its first hold
    assert after_cold[grpc_holds] - before.get(grpc_holds, 0) >= 2
    assert after_cold['pomoview_dataflow_lock_hold_seconds_count{holder="dataflow"}'] >= 1

    # The same lookup again is a hit: no upquery, no Spark job.
    assert moved(after_warm, "pomoview_lookups_total", after_cold) == 1
    assert moved(after_warm, "pomoview_lookup_hits_total", after_cold) == 1
    assert moved(after_warm, "pomoview_lookup_misses_total", after_cold) == 0
    assert moved(after_warm, "pomoview_upquery_seconds_count", after_cold) == 0
    assert moved(after_warm, "pomoview_spark_job_seconds_count", after_cold) == 0

    # The view now holds state for the key it was asked.
    assert after_warm[f'pomoview_state_keys{{view="{VIEW}"}}'] > 0
    assert after_warm[f'pomoview_state_bytes{{view="{VIEW}"}}'] > 0
    assert after_warm["pomoview_partial_state_bytes"] > 0

    # The flusher (every 0.5 s here) moves both batches into Parquet, and is timed doing it.
    flushed = served.wait_for(
        lambda s: s["pomoview_flushed_epoch"] >= epoch and moved(s, "pomoview_flush_seconds_count") >= 1
    )
    assert flushed["pomoview_flushed_epoch"] >= epoch
    assert moved(flushed, "pomoview_flush_seconds_count") >= 1
    assert flushed["pomoview_flush_seconds_sum"] > 0


def test_the_objects_alive_at_start_are_frozen_and_collections_timed(served: Served) -> None:
    """scheduler/gc_policy.py: the server froze what was alive when it became ready (a full
    collection first, which the pause histogram counts), and times each collection since."""
    log = served.server.log_path.read_text()
    match = re.search(r"garbage collector: (\d+) objects alive at start frozen", log)
    assert match is not None and int(match[1]) > 10_000, log[-2000:]
    # scheduler/gil_policy.py: the hits are answered here, so a thread offers the lock soon.
    assert "interpreter switch interval: 0.5 ms (hits answered here)" in log, log[-2000:]
    samples = served.scrape()
    assert samples['pomoview_gc_pause_seconds_count{generation="2"}'] >= 1
    assert samples['pomoview_gc_pause_seconds_sum{generation="2"}'] > 0
    assert 'pomoview_gc_pause_seconds_count{generation="0"}' in samples
