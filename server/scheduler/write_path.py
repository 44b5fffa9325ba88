"""The write path (DESIGN §4): validate -> assign the next epoch -> append to the write-ahead
log and fsync -> reply with the epoch; the log then hands the batch to the apply loop
(applier.py), which applies it to every reader's circuit, in epoch order.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Sequence

from pomoview.planner.frontend.builtins import BUILTIN_SOURCES, read_only
from pomoview.server.errors import InvalidArgument, ResourceExhausted, Unavailable
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.typed_rows import Rows, to_tuples
from pomoview.server.types import LoggedBatch, SourceChange, Tuple_
from pomoview.server.views.view_state import ViewState
from pomoview.server.wal.wal import WalUnusable, WriteAheadLog

Merged = dict[str, tuple[dict[Tuple_, None], dict[Tuple_, None]]]


class WritePath:
    """Assigns epochs and logs batches; `on_durable` gets each batch once it is durable.

    `lock` (the write lock) guards the epoch counter and the submission to the log, so that
    epoch order is log order. Locks, in order: the flusher's, then `lock`, then the dataflow
    lock; the log's own lock is taken under `lock` and itself takes the apply queue's.
    """

    def __init__(
        self,
        view: ViewState,
        wal: WriteAheadLog,
        metrics: Metrics,
        time: TimePath,
        on_durable: Callable[[LoggedBatch], None],
        wait_for_room: Callable[[], None] = lambda: None,
    ) -> None:
        self._view = view
        self._wal = wal
        self._metrics = metrics
        self._time = time
        self._on_durable = on_durable
        # Backpressure: blocks while the views are too far behind the log (applier.py).
        self._wait_for_room = wait_for_room
        self.lock = threading.Lock()
        self._last_assigned = 0  # highest epoch handed to the log, whether or not it committed

    def write(self, changes: Sequence[tuple[str, Rows, Rows]]) -> int:
        """Validates, logs durably and queues one batch; returns its epoch. Each change is
        (source, inserts, deletes), each side as rows or as columns (typed_rows.py)."""
        merged = self._validated(changes)
        self._wait_for_room()  # before the epoch: a refused write leaves no trace
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
            with self.lock:
                # Under @next rules or transient sources, time advances at every write, an
                # empty one too (the in-process engine's epochs).
                if not batch_changes and not self._time.active:
                    return self._view.durable_epoch
                epoch = self.next_epoch()
                commit = self._wal.submit(LoggedBatch(epoch, batch_changes), self._on_durable)
                self._last_assigned = epoch
            commit.wait()
        except WalUnusable as err:
            raise Unavailable(f"{err}; the write was not committed") from None
        except OSError as err:
            cls = ResourceExhausted if err.errno in (errno.ENOSPC, errno.EDQUOT) else Unavailable
            raise cls(
                f"the write-ahead log could not be written: {err}; the write was not committed"
            ) from None
        metrics = self._metrics
        metrics.write_batches.inc()
        metrics.write_rows.inc(sum(len(c.inserts) + len(c.deletes) for c in batch_changes.values()))
        metrics.epochs_committed.inc()
        return epoch

    def _validated(self, changes: Sequence[tuple[str, Rows, Rows]]) -> Merged:
        """Each source's inserts and deletes as tuples of its schema, merged across the
        changes that name it; raises InvalidArgument for a bad change."""
        program = self._view.require_program()
        merged: Merged = {}
        for index, (source, inserts, deletes) in enumerate(changes):
            relation = program.relations.get(source)
            if source in BUILTIN_SOURCES:
                raise InvalidArgument(f"changes[{index}]: {read_only(source)}")
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
        return merged

    def next_epoch(self) -> int:
        """The epoch the next batch takes (caller holds `lock`)."""
        return max(self._last_assigned, self._view.durable_epoch) + 1

    def log_marker(self, epoch: int) -> None:
        """Logs an empty record for `epoch` that never reaches the dataflow, and waits until
        it is durable (a bulk load's: it settles every write submitted before, and keeps
        `epoch` from being reused). Caller holds `lock`; raises OSError if it fails."""
        marker = self._wal.submit(LoggedBatch(epoch, {}))
        self._last_assigned = epoch
        marker.wait()
