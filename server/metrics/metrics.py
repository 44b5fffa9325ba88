"""Prometheus metrics of one server (`pomoview serve --metrics-port PORT`), at /metrics.

Each `Scheduler` has a `Metrics` with a `CollectorRegistry` of its own, not the process's
global one, so that several schedulers (tests) can live in one process. The hot paths only
increment counters and observe histograms; what the dataflow holds is read at scrape time,
through `Scheduler.stats` (which reads the graph as the Stats RPC does: without waiting behind a
running step, server/scheduler/graph_stats.py).

Counters (exposed with the `_total` suffix):
- `pomoview_lookups_total`: Lookup requests, failed ones included.
- `pomoview_lookup_hits_total`: lookups answered from present state, without an upquery.
- `pomoview_lookup_misses_total`: lookups that ran an upquery (at least one key missing).
  Hits plus misses are the lookups answered with at least one key; the rest failed.
- `pomoview_write_batches_total`: write batches committed (durable in the write-ahead log).
- `pomoview_write_rows_total`: rows inserted or deleted by those batches (after merging
  repeats within a batch).
- `pomoview_epochs_committed_total`: epochs committed: one per write batch and one per bulk load.
- `pomoview_subscription_overflows_total`: subscriptions ended with RESOURCE_EXHAUSTED
  because their subscriber fell further behind than `--subscription-buffer` rows.
- `pomoview_dropped_deltas_total`: deltas the dataflow dropped at keys missing from partial
  state, summed over its nodes. Read at scrape time from the current dataflow graph, which
  is rebuilt (from 0) at an install, a bulk load or after a failure: Prometheus's `rate()`
  takes that as a counter reset.

Gauges (read at scrape time):
- `pomoview_applied_epoch`: the last epoch the dataflow applied (what lookups answer at).
- `pomoview_durable_epoch`: the last epoch durable in the write-ahead log.
- `pomoview_flushed_epoch`: the Parquet store's version (epochs flushed into it).
- `pomoview_state_keys{view}`: keys present in the states of the view's dataflow nodes.
- `pomoview_state_rows{view}`: rows in those states.
- `pomoview_state_bytes{view}`: estimated bytes of those states. A node shared by several
  views counts in each of them, so these do not add up across views; every view of the
  installed program has a sample, 0 before it is first looked up.
- `pomoview_subscriptions`: subscriptions open now (`Subscribe` streams).
- `pomoview_partial_state_bytes`: estimated bytes of all partial state (what the memory
  budget bounds), each node once.
- `pomoview_spark_executors`: the executors the server's Spark application can run jobs on:
  1 in local mode (the driver), on a cluster those registered now (0: lookups that need
  Spark fail with UNAVAILABLE), -1 while the session starts (`server/spark/executors.py`).
- `process_*`: the server process's CPU, resident memory and open files.

Histograms (seconds; `_bucket`, `_sum` and `_count` series):
- `pomoview_upquery_seconds`: a lookup that missed, from its start (after waiting for its
  `min_epoch`) until it answered; failed lookups are not observed.
- `pomoview_spark_job_seconds`: one keyed Spark job of an upquery (`SparkFetch.run`),
  shared by the misses it coalesced; failed jobs included. A source with nothing flushed
  into Parquet yet is answered without Spark, in well under a millisecond.
- `pomoview_wal_fsync_seconds`: the fsync of one group commit of the write-ahead log.
- `pomoview_flush_seconds`: one flush that moved batches from the log into Parquet (flushes
  with nothing to move are not observed).
- `pomoview_compaction_seconds`: one compaction of one source of the store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pomoview.server.metrics.counters import Stats

log = logging.getLogger("pomoview.metrics")

# Upqueries and Spark jobs take from a few milliseconds (a warm session, one key) to many
# seconds (a cold JVM, a large fetch).
HOLD_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# An fsync is tens of microseconds on a write-back cache and tens of milliseconds on a disk.
FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
# Flushes and compactions are Spark jobs writing Parquet: a fraction of a second to minutes.
SPARK_WRITE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class StateCollector(Collector):
    """The gauges read from the dataflow at scrape time, so that nothing is maintained for
    them while writes and lookups run. `stats` is `Scheduler.stats`; `views` names the
    installed program's views (to give each one a sample before it has state)."""

    def __init__(self, stats: Callable[[], Stats], views: Callable[[], Iterable[str]]) -> None:
        self._stats = stats
        self._views = views

    def collect(self) -> Iterator[Metric]:
        try:
            stats = self._stats()
            views = list(self._views())
        except Exception:
            # A failed scrape would hide every other metric as well; these are left out.
            log.exception("reading the dataflow's stats for metrics failed")
            return
        for name, value, doc in (
            ("applied_epoch", stats.applied_epoch, "The last epoch the dataflow applied."),
            ("durable_epoch", stats.durable_epoch, "The last epoch durable in the write-ahead log."),
            ("flushed_epoch", stats.flushed_epoch, "The Parquet store's version."),
            ("partial_state_bytes", stats.partial_state_bytes, "Estimated bytes of all partial state."),
            (
                "apply_lag_seconds",
                stats.apply_lag_seconds,
                "Age of the oldest durable write the views do not reflect yet (0: none).",
            ),
            ("apply_lag_epochs", stats.apply_lag_epochs, "Durable epochs the views do not reflect yet."),
        ):
            yield GaugeMetricFamily(f"pomoview_{name}", doc, value=value)
        yield CounterMetricFamily(
            "pomoview_dropped_deltas",
            "Deltas dropped at keys missing from partial state (from 0 when the dataflow is rebuilt).",
            value=stats.dropped_deltas,
        )
        keys, rows, size = per_view(stats, views)
        for name, values, doc in (
            ("state_keys", keys, "Keys present in the states of the view's dataflow nodes."),
            ("state_rows", rows, "Rows in the states of the view's dataflow nodes."),
            ("state_bytes", size, "Estimated bytes of the states of the view's dataflow nodes."),
        ):
            family = GaugeMetricFamily(f"pomoview_{name}", doc, labels=["view"])
            for view, value in sorted(values.items()):
                family.add_metric([view], value)
            yield family


def per_view(
    stats: Stats, views: Iterable[str]
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Present keys, rows and estimated bytes of each view's stateful nodes: 0 for each of
    `views` without state; a node read by several views counts in each."""
    keys = dict.fromkeys(views, 0)
    rows = dict(keys)
    size = dict(keys)
    for node in stats.states:
        if not node.stateful:
            continue
        for view in node.views:
            keys[view] = keys.get(view, 0) + node.present_keys
            rows[view] = rows.get(view, 0) + node.rows
            size[view] = size.get(view, 0) + node.bytes
    return keys, rows, size


class Metrics:
    """One server's metrics and, once `serve` is called, the HTTP server that exposes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.lookups = Counter("pomoview_lookups", "Lookup requests.", registry=r)
        self.lookup_hits = Counter(
            "pomoview_lookup_hits", "Lookups answered from present state.", registry=r
        )
        self.lookup_misses = Counter("pomoview_lookup_misses", "Lookups that ran an upquery.", registry=r)
        self.upquery_seconds = Histogram(
            "pomoview_upquery_seconds", "Lookups that missed, start to answer.", buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.spark_job_seconds = Histogram(
            "pomoview_spark_job_seconds", "Keyed Spark jobs of upqueries.", buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.write_batches = Counter("pomoview_write_batches", "Write batches committed.", registry=r)
        self.write_rows = Counter(
            "pomoview_write_rows", "Rows inserted or deleted by committed write batches.", registry=r
        )
        self.epochs_committed = Counter(
            "pomoview_epochs_committed", "Epochs committed (write batches and bulk loads).", registry=r
        )
        self.wal_fsync_seconds = Histogram(
            "pomoview_wal_fsync_seconds", "fsyncs of the write-ahead log's group commits.",
            buckets=FSYNC_BUCKETS, registry=r,
        )
        self.flush_seconds = Histogram(
            "pomoview_flush_seconds", "Flushes of the log into Parquet that moved batches.",
            buckets=SPARK_WRITE_BUCKETS, registry=r,
        )
        self.compaction_seconds = Histogram(
            "pomoview_compaction_seconds", "Compactions of one source of the store.",
            buckets=SPARK_WRITE_BUCKETS, registry=r,
        )
        self.lock_hold_seconds = Histogram(
            "pomoview_dataflow_lock_hold_seconds",
            "Holds of the dataflow lock, by the holding thread: dataflow (the apply's steps), grpc "
            "(lookups' rounds), flusher, window (background refills and settles), and others. The "
            "apply waits behind every other holder.",
            ["holder"],
            buckets=HOLD_BUCKETS,
            registry=r,
        )
        self._holders: dict[str, Any] = {}  # lock_hold_seconds' child per holder
        self.gc_pause_seconds = Histogram(
            "pomoview_gc_pause_seconds",
            "Garbage collections of the server's process, by generation: every thread stops "
            "for each (a full collection is generation 2).",
            ["generation"],
            buckets=HOLD_BUCKETS,
            registry=r,
        )
        self._generations = [self.gc_pause_seconds.labels(str(g)) for g in range(3)]
        self.subscription_overflows = Counter(
            "pomoview_subscription_overflows",
            "Subscriptions ended because their subscriber fell behind by more than the buffer.",
            registry=r,
        )
        self.subscriptions = Gauge("pomoview_subscriptions", "Subscriptions open now.", registry=r)
        ProcessCollector(registry=r)
        self._http: WSGIServer | None = None
        self._http_thread: threading.Thread | None = None

    def lock_held(self, holder: str, seconds: float) -> None:
        """One hold of the dataflow lock (ViewState.on_hold): called with it held, so cheap."""
        child = self._holders.get(holder)
        if child is None:
            child = self._holders[holder] = self.lock_hold_seconds.labels(holder)
        child.observe(seconds)

    def gc_paused(self, generation: int, seconds: float) -> None:
        """One garbage collection's pause (scheduler/gc_policy.py's GcPauses)."""
        self._generations[generation].observe(seconds)

    def watch(self, stats: Callable[[], Stats], views: Callable[[], Iterable[str]]) -> None:
        """Adds the gauges read at scrape time from `stats()` (see `StateCollector`)."""
        self.registry.register(StateCollector(stats, views))

    def watch_spark(self, executors: Callable[[], int]) -> None:
        """Adds `pomoview_spark_executors`, read from `executors()` at scrape time."""
        gauge = Gauge(
            "pomoview_spark_executors",
            "Executors the server's Spark application can run jobs on (1 in local mode; 0: "
            "none, lookups that need Spark fail; -1: the session is starting).",
            registry=self.registry,
        )
        gauge.set_function(lambda: float(executors()))

    def serve(self, host: str, port: int) -> str:
        """Serves the metrics over HTTP on `host:port` (0: a free port) from a daemon thread;
        returns the URL of /metrics. Raises OSError if the port cannot be bound."""
        # Process-wide, but only a server serves: a `_created` sample per counter and histogram
        # (its start time) would be stored by Prometheus as one more series each, for nothing.
        disable_created_metrics()
        self._http, self._http_thread = start_http_server(port, addr=host, registry=self.registry)
        bound = self._http.server_port
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{bound}/metrics"

    def close(self) -> None:
        """Stops the HTTP server, if one runs."""
        http, self._http = self._http, None
        if http is not None:
            http.shutdown()
            http.server_close()
        if self._http_thread is not None:
            self._http_thread.join(timeout=5)
            self._http_thread = None
