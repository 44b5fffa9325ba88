"""What Stats says of the dataflow graph (its readers and node states), read without waiting
behind a running step.

The graph is read under the dataflow lock, which the apply holds for a whole step. Under
writes a step takes tens to hundreds of milliseconds on a loaded machine, and a Stats call
(or a metrics scrape) that waited for the lock took 58 ms at p50 and 704 ms at p99 in
bench/hits_under_load.py's busy phase: Python's lock is not fair, so the apply thread often
took it again for its next step before the waiting call woke. The epochs and the lag that
Stats also reports need no lock at all. So a reading of the graph is taken under the lock,
either by the Stats call itself when it gets the lock within `wait`, or by the apply at the
end of a step (`after_step`), and kept (`last`):

- a call that gets the lock within `wait` takes a reading, unless the last one still holds
  (a quiet server polled again: then it is the answer);
- otherwise, if the last reading still holds, it answers with it at once; and it asks the
  apply for a reading at the end of its running step (`wanted`);
- otherwise it tries again: the step ends within one step, and then either the lock is free
  or the apply has left a reading.

The apply takes a reading only when a call asked for one since the last it took, not at every
step: a reading walks every node's state (its estimate of bytes included), and when the apply
left one at each step's end for a second after any call, the readings took 7.7% of the
dataflow thread's time in bench/hits_under_load.py's busy phase (full scale, py-spy
`--gil`), where its sampler calls Stats every 100 ms and steps end every few ms. A call
polling under writes now waits for the end of a step about every other time.

Invariant: a reading holds while no hold of the dataflow lock has ended since the one that
took it. The lock counts its releases (`ViewState.lock_releases`), and a reading records the
count in the hold it was taken in. Everything the graph holds changes only under the lock,
so a reading that holds describes exactly the graph's state at its `epoch`; that epoch is at
most the applied one (a step may have published a later epoch and not yet released the
lock: `states_epoch` then says which one the states are of). The bound is asserted in debug
runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pomoview.dataflow.introspect import NodeInfo
from pomoview.server.metrics.counters import ReaderInfo
from pomoview.server.views.view_state import ViewState

# How long a Stats call waits for the dataflow lock before it looks at the last reading.
DEFAULT_WAIT = 0.01


@dataclass(frozen=True)
class GraphReading:
    epoch: int  # the applied epoch it describes
    releases: int  # the lock's releases when it was taken (under the lock)
    readers: list[ReaderInfo] = field(default_factory=list)
    states: list[NodeInfo] = field(default_factory=list)
    dropped: int = 0
    partial_bytes: int = 0


class GraphStats:
    def __init__(self, view: ViewState, wait: float = DEFAULT_WAIT) -> None:
        self._view = view
        self._wait = wait
        self.last: GraphReading | None = None  # replaced whole: read without the lock
        self.wanted = False  # a call found the lock held: the apply leaves a reading
        self.taken_by_apply = 0  # readings the apply took (tests)
        self.busy_tries = 0  # tries that found the lock held (tests)

    def read(self) -> GraphReading:
        view = self._view
        lock = view.lock
        while not lock.acquire(timeout=self._wait):
            self.busy_tries += 1
            self.wanted = True
            last = self.last
            if last is not None and self.holds(last):
                assert last.epoch <= view.applied_epoch, (last.epoch, view.applied_epoch)
                return last
        try:
            last = self.last
            # Nothing changed since a reading that still holds: walking every state again
            # would describe the same graph (a quiet server polled by Stats or a scrape).
            return last if last is not None and self.holds(last) else self._take()
        finally:
            lock.release()

    def holds(self, reading: GraphReading) -> bool:
        """Whether no hold of the lock but the reading's own has ended since it was taken."""
        return self._view.lock_releases() - reading.releases <= 1

    def after_step(self) -> None:
        """The apply, with the lock held at the very end of a step: a reading, if a Stats call
        asked for one since the last it took (a call asking after this test asks the next
        step's end)."""
        if self.wanted:
            self.wanted = False
            self._take()
            self.taken_by_apply += 1

    def _take(self) -> GraphReading:
        """A reading of the graph now (caller holds the lock), kept as the last one."""
        view = self._view
        releases = view.lock_releases()
        holder = view.graph
        if holder is None:
            reading = GraphReading(view.applied_epoch, releases)
        else:
            graph = holder.graph
            reading = GraphReading(
                epoch=view.applied_epoch,
                releases=releases,
                readers=[
                    ReaderInfo(name, key, reader.partial, reader.state.present_keys())
                    for (name, key), reader in graph.readers.items()
                ],
                states=graph.node_infos(),
                dropped=graph.metrics.dropped,
                partial_bytes=graph.partial_bytes(),
            )
        self.last = reading
        return reading


__all__ = ["GraphReading", "GraphStats"]
