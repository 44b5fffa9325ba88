"""The write path (DESIGN §4): validate -> assign the next epoch -> append to the write-ahead
log and fsync -> reply with the epoch -> the dataflow thread applies the batch to every
reader's circuit, one epoch at a time, in order.

Locks: `_write_lock` (epoch counter, log submission) then `_dataflow`; the log's own lock is
taken under `_write_lock` and itself takes `_queue_ready` (in `_on_durable`).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Sequence

from pomoview.server.errors import InvalidArgument, ResourceExhausted, Unavailable
from pomoview.server.scheduler.scheduler_state import SchedulerState
from pomoview.server.scheduler.write_rows import Rows, to_tuples
from pomoview.server.types import LoggedBatch, SourceChange, Tuple_
from pomoview.server.wal.wal import WalUnusable

log = logging.getLogger("pomoview.scheduler")


class WritePath(SchedulerState):

    def write(self, changes: Sequence[tuple[str, Rows, Rows]]) -> int:
        """Validates, logs durably and queues one batch; returns its epoch. Each change is
        (source, inserts, deletes), each side as rows or as columns (write_rows.py)."""
        program = self._require_program()
        merged: dict[str, tuple[dict[Tuple_, None], dict[Tuple_, None]]] = {}
        for index, (source, inserts, deletes) in enumerate(changes):
            relation = program.relations.get(source)
            if relation is None or relation.kind != "source":
                known = ", ".join(sorted(program.checked.sources))
                raise InvalidArgument(
                    f"changes[{index}]: unknown source {source!r} (sources: {known})"
                )
            schema = program.source_schema(source)
            ins, dels = merged.setdefault(source, ({}, {}))
            for kind, rows, out in (("inserts", inserts, ins), ("deletes", deletes, dels)):
                out.update(dict.fromkeys(to_tuples(rows, schema, f"{source} {kind}")))
        for source, (ins, dels) in merged.items():
            both = [t for t in ins if t in dels]
            if both:
                raise InvalidArgument(f"{source}: the batch both inserts and deletes {both[0]!r}")
        batch_changes = {
            s: SourceChange(tuple(ins), tuple(dels))
            for s, (ins, dels) in merged.items()
            if ins or dels
        }
        try:
            # Assigning the epoch and queueing the record under one lock keeps epoch order equal
            # to log order; the fsync happens outside it, shared with the writers queued
            # meanwhile (group commit). A refused epoch is skipped, never reused: later epochs
            # may already be queued behind it, and recovery accepts gaps.
            with self._write_lock:
                # Under @next rules or transient sources, time advances at every write, an
                # empty one too (the in-process engine's epochs).
                if not batch_changes and self.time is None:
                    return self.durable_epoch
                epoch = max(self._last_assigned, self.durable_epoch) + 1  # type: ignore[has-type]  # the mixin goes in the next commits
                commit = self.wal.submit(LoggedBatch(epoch, batch_changes), self._on_durable)
                self._last_assigned = epoch
            commit.wait()
        except WalUnusable as err:
            raise Unavailable(f"{err}; the write was not committed") from None
        except OSError as err:
            cls = ResourceExhausted if err.errno in (errno.ENOSPC, errno.EDQUOT) else Unavailable
            raise cls(
                f"the write-ahead log could not be written: {err}; the write was not committed"
            ) from None
        metrics = self.metrics
        metrics.write_batches.inc()
        metrics.write_rows.inc(sum(len(c.inserts) + len(c.deletes) for c in batch_changes.values()))
        metrics.epochs_committed.inc()
        return epoch

    def _on_durable(self, batch: LoggedBatch) -> None:
        """Called by the log, in log order, once `batch` is durable and before its writer is
        acknowledged: so the dataflow applies only logged batches, in epoch order."""
        self.durable_epoch = batch.epoch
        with self._queue_ready:
            self._queue.append(batch)
            self._queue_ready.notify()

    def _apply_loop(self) -> None:
        while not self._stopping.is_set():
            with self._queue_ready:
                while not self._queue and not self._stopping.is_set():
                    self._queue_ready.wait(timeout=0.5)
                if not self._queue:
                    continue
                batch = self._queue.popleft()
            try:
                self._apply(batch)
            except Exception:  # a bug in one circuit must not stop the write path
                log.exception("applying epoch %d failed", batch.epoch)

    def _apply(self, batch: LoggedBatch) -> None:
        with self._dataflow:
            self._seq += 1  # odd: lookups without the lock do not trust what they read
            self.tail.append(batch)
            ops = self._epoch_operations(batch)  # steps the @next state too
            if ops is None:
                self._reset_graph()  # the @next state caught up: the graph missed its deltas
            elif self.graph is not None:
                try:
                    self.graph.step(ops)
                except Exception:
                    # Operator state is a cache of the sources: a new graph refills from them.
                    log.exception("the dataflow failed at epoch %d; it will be rebuilt", batch.epoch)
                    self._reset_graph()
            self.applied_epoch = batch.epoch
            self._seq += 1
            self.subscriptions.seal(batch.epoch)  # never waits: see subscriptions.py
            self._enforce_budget()
            self._dataflow.notify_all()
