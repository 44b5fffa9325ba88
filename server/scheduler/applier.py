"""The apply loop (DESIGN §4): the dataflow thread applies each durable batch to every
reader's circuit, one epoch at a time, in epoch order."""

from __future__ import annotations

import logging
import threading
from collections import deque

from pomoview.server.temporal.time_path import TimePath
from pomoview.server.types import LoggedBatch
from pomoview.server.views.view_state import ViewState

log = logging.getLogger("pomoview.scheduler")


class Applier:
    """Queues the batches the log made durable (`on_durable`) and applies them (`run`, the
    dataflow thread, until `stopping` is set).

    Its queue's lock is taken by the log's thread (in `on_durable`) under the log's own
    lock, itself taken under the write lock; nothing is taken under it.
    """

    def __init__(self, view: ViewState, time: TimePath, stopping: threading.Event) -> None:
        self._view = view
        self._time = time
        self._stopping = stopping
        self._queue: deque[LoggedBatch] = deque()
        self._queue_ready = threading.Condition(threading.Lock())

    def on_durable(self, batch: LoggedBatch) -> None:
        """Called by the log, in log order, once `batch` is durable and before its writer is
        acknowledged: so the dataflow applies only logged batches, in epoch order."""
        self._view.durable_epoch = batch.epoch
        with self._queue_ready:
            self._queue.append(batch)
            self._queue_ready.notify()

    def wake(self) -> None:
        """Wakes `run` (to see `stopping`)."""
        with self._queue_ready:
            self._queue_ready.notify_all()

    def run(self) -> None:
        while not self._stopping.is_set():
            with self._queue_ready:
                while not self._queue and not self._stopping.is_set():
                    self._queue_ready.wait(timeout=0.5)
                if not self._queue:
                    continue
                batch = self._queue.popleft()
            try:
                self.apply(batch)
            except Exception:  # a bug in one circuit must not stop the write path
                log.exception("applying epoch %d failed", batch.epoch)

    def apply(self, batch: LoggedBatch) -> None:
        view = self._view
        with view.lock:
            view.begin_apply()
            view.tail.append(batch)
            ops = self._time.epoch_operations(batch)  # steps the @next state too
            if ops is None:
                view.reset_graph()  # the @next state caught up: the graph missed its deltas
            elif view.graph is not None:
                try:
                    view.graph.step(ops)
                except Exception:
                    # Operator state is a cache of the sources: a new graph refills from them.
                    log.exception("the dataflow failed at epoch %d; it will be rebuilt", batch.epoch)
                    view.reset_graph()
            view.end_apply(batch.epoch)
            view.subscriptions.seal(batch.epoch)  # never waits: see subscriptions.py
            view.enforce_budget()
            view.lock.notify_all()
