"""The apply loop (DESIGN §4): the dataflow thread applies the durable batches to every
reader's circuit, in epoch order. When several batches wait, it applies a run of them as one
step: one consolidated set of operations per source, one pass of the circuit, published at
the last epoch of the run (subscribers get the run's net change at that epoch). Under
`@next` rules or transient sources time advances at every epoch, so each batch still gets a
pass of its own, but the run is published once.

Reads never wait for a step (operators/reader.py keeps the published versions while one is
open); writers wait before they are acknowledged when the oldest batch not yet applied is
older than the bound on the apply's lag (`wait_for_room`), so no writer can push the views
far behind the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.state.keyed_state import Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import ShortWindows
from pomoview.server.errors import Unavailable
from pomoview.server.scheduler.gates import ApplyGates
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.types import LoggedBatch
from pomoview.server.views.view_state import ViewState

log = logging.getLogger("pomoview.scheduler")

# A step takes at most this many batches, or the batches up to this many rows: it holds the
# dataflow lock (lookups' rounds wait behind it; hits do not), so it is bounded even when
# the backlog is not.
MAX_STEP_BATCHES = 512
MAX_STEP_ROWS = 200_000
# The default bound on the apply's lag (`serve --max-apply-lag`), in seconds. A writer as
# fast as it is acknowledged keeps the lag near the bound, and a step applies what waited:
# at 0.25 s the apply lag's p99 was 375-674 ms and the subscriptions' 285-389 ms; at 0.1 s,
# 202-302 ms and 179-209 ms, with as many votes applied a second (29-34k; the votes'
# workload at scale 0.1, bench/hits_under_load.py, two runs each).
DEFAULT_MAX_APPLY_LAG = 0.1
# A writer waits for room at most this long, then is refused (the apply is stuck, or far
# slower than the writes): better a clear UNAVAILABLE than views minutes behind.
MAX_ROOM_WAIT = 30.0


def consolidated(batches: Sequence[LoggedBatch]) -> dict[str, ZSet[Row]]:
    """The batches' operations per source as one set: an insert or a delete sets a tuple's
    presence, so the last operation on a tuple in the run is the one that counts (source
    indexes turn operations into exact deltas against what is present)."""
    weights: dict[str, dict[Row, int]] = {}
    for batch in batches:
        for source, change in batch.changes.items():
            ops = weights.setdefault(source, {})
            # A batch's inserts and deletes are disjoint (write() made them so).
            ops.update(dict.fromkeys(change.inserts, 1))
            ops.update(dict.fromkeys(change.deletes, -1))
    return {source: ZSet.of_weights(ops) for source, ops in weights.items()}


class Applier:
    """Queues the batches the log made durable (`on_durable`) and applies them (`run`, the
    dataflow thread, until `stopping` is set).

    Its queue's lock is taken by the log's thread (in `on_durable`) under the log's own
    lock, itself taken under the write lock; nothing is taken under it.
    """

    def __init__(
        self,
        view: ViewState,
        time: TimePath,
        stopping: threading.Event,
        *,
        max_lag: float = DEFAULT_MAX_APPLY_LAG,
        refill: Callable[[ShortWindows], None] = lambda _: None,
        settle: Callable[[list[DemandGate]], None] = lambda _: None,
        after_step: Callable[[], None] = lambda: None,
    ) -> None:
        """`refill(windows)`, after a step that left windows of ordered views short: looks
        them up again, in the background (`Lookups.refill`). `settle(gates)`, after a step
        that left demand gates with subscribed keys lacking rows: fills them, in the
        background (`Lookups.settle`). `after_step()`, with the dataflow lock held, last
        thing in each step (`GraphStats.after_step`)."""
        self._view = view
        self._refill = refill
        self._settle = settle
        self._after_step = after_step
        self._time = time
        self._stopping = stopping
        self.max_lag = max_lag
        # (batch, when it became durable), in epoch order.
        self._queue: deque[tuple[LoggedBatch, float]] = deque()
        self._queue_ready = threading.Condition(threading.Lock())
        # When the oldest batch of the step being applied became durable (None: no step).
        # The running step's oldest batch's durable time and its last epoch: its batches are
        # unapplied until the view publishes that epoch (the step's end does more after it).
        self._applying: tuple[float, int] | None = None
        self.steps = 0  # steps applied (a step applies one or more batches)
        self._gates = ApplyGates(stopping)  # tests' (gates.py); inert in a real server
        self.waiting = 0  # writers waiting for room now

    def on_durable(self, batch: LoggedBatch) -> None:
        """Called by the log, in log order, once `batch` is durable and before its writer is
        acknowledged: so the dataflow applies only logged batches, in epoch order."""
        self._view.durable_epoch = batch.epoch
        with self._queue_ready:
            self._queue.append((batch, time.monotonic()))
            self._queue_ready.notify_all()

    def wake(self) -> None:
        """Wakes `run` (to see `stopping`) and the writers waiting for room."""
        with self._queue_ready:
            self._queue_ready.notify_all()

    def lag(self) -> float:
        """Seconds since the oldest durable batch not yet applied became durable (0: none)."""
        with self._queue_ready:
            return self._lag_locked(time.monotonic())

    def _lag_locked(self, now: float) -> float:
        """Caller holds the queue's lock. A step's batches count until it publishes its
        epoch, not until it ends: after it, the step hands its changes to subscriptions and
        the hit replica and checks the memory budget, and a lag read then (by Stats, or a
        writer waiting for room) counted that time, up to 328 ms in the busy phase of
        bench/hits_under_load.py with every batch applied."""
        applying, oldest = self._applying, None
        if applying is not None and self._view.applied_epoch < applying[1]:
            oldest = applying[0]
        elif self._queue:
            oldest = self._queue[0][1]
        return 0.0 if oldest is None else now - oldest

    def wait_for_room(self) -> None:
        """Backpressure: returns once the apply's lag is within `max_lag`; raises Unavailable
        after MAX_ROOM_WAIT seconds of waiting (called by a writer before it commits)."""
        with self._queue_ready:
            now = time.monotonic()
            if self._lag_locked(now) <= self.max_lag:
                return
            deadline = now + MAX_ROOM_WAIT
            self.waiting += 1
            try:
                while self._lag_locked(now) > self.max_lag and not self._stopping.is_set():
                    if now >= deadline:
                        raise Unavailable(
                            f"the views are {self._lag_locked(now):.1f} s behind the log (the bound "
                            f"is {self.max_lag:g} s, serve --max-apply-lag); the write was not "
                            "committed, retry"
                        )
                    self._queue_ready.wait(timeout=min(deadline - now, 0.5))
                    now = time.monotonic()
            finally:
                self.waiting -= 1

    def run(self) -> None:
        while not self._stopping.is_set():
            with self._queue_ready:
                while not self._queue and not self._stopping.is_set():
                    self._queue_ready.wait(timeout=0.5)
            self._gates.before_take()  # once a batch waits: a test's hold then catches it
            with self._queue_ready:
                if not self._queue:
                    continue
                batches, since = self._take()
                self._applying = (since, batches[-1].epoch)
            try:
                self.apply(batches)
            except Exception:  # a bug in one circuit must not stop the write path
                log.exception("applying epochs %d..%d failed", batches[0].epoch, batches[-1].epoch)
            finally:
                with self._queue_ready:
                    self._applying = None
                    self._queue_ready.notify_all()  # the writers waiting for room

    def _take(self) -> tuple[list[LoggedBatch], float]:
        """The next run of queued batches for one step, and when its oldest became durable
        (caller holds the queue's lock; the queue is not empty)."""
        queue = self._queue
        batch, since = queue.popleft()
        batches, rows = [batch], _rows(batch)
        while queue and len(batches) < MAX_STEP_BATCHES and rows < MAX_STEP_ROWS:
            batch = queue.popleft()[0]
            batches.append(batch)
            rows += _rows(batch)
        return batches, since

    def apply(self, batches: Sequence[LoggedBatch]) -> None:
        """Applies consecutive `batches` as one step, published at the last one's epoch."""
        view = self._view
        last = batches[-1].epoch
        with view.lock:
            view.begin_apply()
            try:
                for batch in batches:
                    view.tail.append(batch)
                self._step(batches)
                self._gates.mid_step(batches)
            finally:
                view.end_apply(last)  # even when the step failed: the graph was rebuilt then
            self.steps += 1
            view.subscriptions.seal(last)  # never waits: see subscriptions.py
            view.enforce_budget()
            short = view.graph.short_windows() if view.graph is not None else []
            unsettled = view.graph.take_unsettled() if view.graph is not None else []
            self._after_step()  # last: nothing changes the graph between it and the release
            view.lock.notify_all()
        if short:
            self._refill(short)
        if unsettled:
            self._settle(unsettled)

    def _step(self, batches: Sequence[LoggedBatch]) -> None:
        view = self._view
        if self._time.active:
            for batch in batches:  # time advances at every epoch: a pass each
                ops = self._time.epoch_operations(batch)  # steps the @next state too
                if ops is None:
                    view.reset_graph()  # the @next state caught up: the graph missed its deltas
                else:
                    self._pass(ops, batch.epoch)
        else:
            self._pass(consolidated(batches), batches[-1].epoch)

    def _pass(self, ops: dict[str, ZSet[Row]], epoch: int) -> None:
        graph = self._view.graph
        if graph is None:
            return
        try:
            graph.step(ops)
        except Exception:
            # Operator state is a cache of the sources: a new graph refills from them.
            log.exception("the dataflow failed at epoch %d; it will be rebuilt", epoch)
            self._view.reset_graph()


def _rows(batch: LoggedBatch) -> int:
    return sum(len(c.inserts) + len(c.deletes) for c in batch.changes.values())
