"""What the scheduler's parts share: the state `Scheduler` keeps, declared once for the
type checker, so that the write path, the lookup rounds and the flusher (one module each)
can use it."""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable

from pomoview.dataflow.node import Filters
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram, ProgramGraph
from pomoview.server.reads.overlay import LogTail
from pomoview.server.reads.subscriptions import Subscriptions
from pomoview.server.reads.upquery_jobs import UpqueryJobs
from pomoview.server.scheduler.counters import Counters
from pomoview.server.scheduler.memory_budget import MemoryBudget
from pomoview.server.scheduler.metrics import Metrics
from pomoview.server.store.source_store import SourceStore
from pomoview.server.temporal.time_state import Checkpoint, TimeState
from pomoview.server.types import LoggedBatch
from pomoview.server.wal.wal import WriteAheadLog

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
    time: TimeState | None
    transient_sources: frozenset[str]

    def _require_program(self) -> CompiledProgram:
        raise NotImplementedError

    def _reset_graph(self) -> None:
        raise NotImplementedError

    # Time (time_path.py): the dataflow's changes of an applied batch (None: rebuild the
    # graph), the fetch of a transient source or `p@next` relation (None: any other), the
    # state to checkpoint before a flush, and the batches without their transient changes.
    def _epoch_operations(self, batch: LoggedBatch) -> dict[str, ZSet[Row]] | None:
        raise NotImplementedError

    def _time_fetch(
        self, source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
    ) -> list[Row] | None:
        raise NotImplementedError

    def _time_checkpoint(self) -> Checkpoint | None:
        raise NotImplementedError

    def _storable(self, batches: list[LoggedBatch]) -> list[LoggedBatch]:
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
