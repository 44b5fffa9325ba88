"""server/metrics.py: the per-view state gauges read at scrape time, registries kept apart per
server, the HTTP endpoint; and, over real Spark, the scheduler's flush and compaction timings."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pomoview.dataflow.introspect import NodeInfo
from pomoview.server.metrics.counters import Stats
from pomoview.server.metrics.metrics import Metrics, per_view
from pomoview.server.scheduler.scheduler import Scheduler

from .test_scheduler import PROGRAM_A, row


def _stats(states: list[NodeInfo], **counters: int) -> Stats:
    base = dict(
        applied_epoch=7, durable_epoch=8, flushed_epoch=5, upqueries=0, spark_jobs=0, dropped_deltas=3
    )
    return Stats(**{**base, **counters}, states=states)  # type: ignore[arg-type]


STATES = [
    # A stateless node's numbers are not state.
    NodeInfo("n0", "Filter", "", stateful=False, present_keys=99, rows=99, bytes=99, views=["v", "w"]),
    NodeInfo("n1", "Reader", "", stateful=True, present_keys=2, rows=5, bytes=100, views=["v"]),
    NodeInfo("n2", "Join", "", stateful=True, present_keys=3, rows=4, bytes=50, views=["v", "w"]),
]


def test_each_view_sums_the_states_it_reads_and_a_view_without_state_shows_zero() -> None:
    keys, rows, size = per_view(_stats(STATES), ["v", "w", "idle"])
    assert keys == {"v": 5, "w": 3, "idle": 0}
    assert rows == {"v": 9, "w": 4, "idle": 0}
    assert size == {"v": 150, "w": 50, "idle": 0}  # the shared join counts in both views


def test_the_state_gauges_are_read_from_stats_at_each_scrape() -> None:
    metrics = Metrics()
    states: list[NodeInfo] = []
    metrics.watch(lambda: _stats(states), lambda: ["v", "w"])
    get = metrics.registry.get_sample_value
    assert get("pomoview_state_bytes", {"view": "v"}) == 0
    assert get("pomoview_applied_epoch") == 7 and get("pomoview_flushed_epoch") == 5
    assert get("pomoview_dropped_deltas_total") == 3
    states.extend(STATES)
    assert get("pomoview_state_bytes", {"view": "v"}) == 150
    assert get("pomoview_state_keys", {"view": "w"}) == 3


def test_a_failing_stats_read_leaves_out_only_its_own_gauges() -> None:
    metrics = Metrics()

    def broken() -> Stats:
        raise RuntimeError("no dataflow")

    metrics.watch(broken, lambda: ["v"])
    metrics.lookups.inc()
    assert metrics.registry.get_sample_value("pomoview_lookups_total") == 1
    assert metrics.registry.get_sample_value("pomoview_applied_epoch") is None


def test_two_servers_in_one_process_count_apart_and_serve_over_http() -> None:
    first, second = Metrics(), Metrics()
    try:
        first.write_rows.inc(3)
        second.write_rows.inc(5)
        url = first.serve("127.0.0.1", 0)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        samples = {
            s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
        }
        assert samples["pomoview_write_rows_total"] == 3
        assert second.registry.get_sample_value("pomoview_write_rows_total") == 5
        assert "process_resident_memory_bytes" in samples
    finally:
        first.close()
        second.close()


def test_the_scheduler_times_flushes_that_move_batches_and_compactions(tmp_path: Path, spark: Any) -> None:
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    s.compact_min_parts = 2
    s.start()
    get = s.metrics.registry.get_sample_value
    try:
        s.install(PROGRAM_A)
        assert s.flush() == 0  # nothing to move: not observed
        assert get("pomoview_flush_seconds_count") == 0
        for i in range(2):
            epoch = s.write([("b", [row(x=i)], [])])
            s.lookup("v", [row(x=i)], min_epoch=epoch)  # waits until applied, so it flushes
            assert s.flush() == epoch
        assert get("pomoview_flush_seconds_count") == 2
        assert get("pomoview_wal_fsync_seconds_count") >= 2  # type: ignore[operator]
        assert get("pomoview_epochs_committed_total") == 2
        assert s.compact() == ["b"]
        assert get("pomoview_compaction_seconds_count") == 1
        assert get("pomoview_compaction_seconds_sum") > 0  # type: ignore[operator]
    finally:
        s.stop()
