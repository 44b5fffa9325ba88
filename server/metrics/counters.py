"""The scheduler's counters and the Stats it reports."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from pomoview.dataflow.introspect import NodeInfo


@dataclass
class Counters:
    """Lookups that upqueried, and keyed Spark jobs run; counted from many threads (read
    without the lock: a reader sees one count or the next)."""

    upqueries: int = 0
    spark_jobs: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def add_upquery(self) -> None:
        with self._lock:
            self.upqueries += 1

    def add_spark_job(self) -> None:
        with self._lock:
            self.spark_jobs += 1


@dataclass
class ReaderInfo:
    view: str
    key: tuple[str, ...]
    partial: bool
    present_keys: int


@dataclass
class Stats:
    applied_epoch: int
    durable_epoch: int
    flushed_epoch: int
    upqueries: int
    spark_jobs: int
    dropped_deltas: int
    readers: list[ReaderInfo] = field(default_factory=list)
    # Every node of the program's dataflow built so far, inputs first.
    states: list[NodeInfo] = field(default_factory=list)
    memory_budget: int = 0
    rss_bytes: int = 0
    baseline_rss_bytes: int = 0
    partial_state_bytes: int = 0
    eviction_rounds: int = 0
    # How far the views are behind the log: the age of the oldest durable batch not yet
    # applied, and the epochs between the durable and the applied one.
    apply_lag_seconds: float = 0.0
    apply_lag_epochs: int = 0
    # The applied epoch that `readers`, `states`, `dropped_deltas` and `partial_state_bytes`
    # describe: under writes, the end of an earlier step (server/scheduler/graph_stats.py).
    states_epoch: int = 0
