"""What the scheduler's parts share: the state `Scheduler` keeps, declared once for the
type checker, so that the write path, the lookup rounds and the flusher (one module each)
can use it."""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable

from pomoview.planner.compile import CompiledProgram, ProgramGraph

from .counters import Counters
from .memory_budget import MemoryBudget
from .metrics import Metrics
from .overlay import LogTail
from .source_store import SourceStore
from .subscriptions import Subscriptions
from .types import LoggedBatch
from .upquery_jobs import UpqueryJobs
from .wal import WriteAheadLog

log = logging.getLogger("pomoview.memory")


class SchedulerState:
    program: CompiledProgram | None
    graph: ProgramGraph | None
    counters: Counters
    store: SourceStore
    wal: WriteAheadLog
    tail: LogTail
    applied_epoch: int
    durable_epoch: int
    _spark: Callable[[], object]
    _counter_lock: threading.Lock
    _write_lock: threading.Lock
    _last_assigned: int
    _dataflow: threading.Condition
    _queue: deque[LoggedBatch]
    _queue_ready: threading.Condition
    _stopping: threading.Event
    _flushing: threading.Lock
    _upquery_versions: Counter[int]
    upquery_jobs: UpqueryJobs
    flush_interval: float
    memory: MemoryBudget | None
    metrics: Metrics
    subscriptions: Subscriptions
    # A sequence lock over the applied state, for reads without the dataflow lock: odd while
    # an epoch is applied or the graph replaced, moved only under the dataflow lock.
    _seq: int

    def _require_program(self) -> CompiledProgram:
        raise NotImplementedError

    def _reset_graph(self) -> None:
        raise NotImplementedError

    def _enforce_budget(self) -> None:
        """Evicts partial state when the process's memory is over the budget (caller holds
        the dataflow lock; memory_budget.py says when, dataflow/eviction.py what)."""
        memory, graph = self.memory, self.graph
        if memory is None or graph is None:
            return
        need = memory.to_free(graph.graph.partial_bytes)
        if need:
            done = graph.graph.evict(need)
            memory.evictions += 1
            log.debug(
                "memory: RSS %d MiB over the budget; evicted %d keys (%d MiB estimated) in %d steps",
                (memory.last_rss - memory.baseline) >> 20, done.keys, done.estimated_bytes >> 20, done.steps,
            )
