"""The scheduler's counters and the Stats it reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from pomoview.dataflow.introspect import NodeInfo


@dataclass
class Counters:
    upqueries: int = 0
    spark_jobs: int = 0


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
