"""The applied state every part of the scheduler shares: the program and its dataflow graph,
the applied and durable epochs, the log tail, and the dataflow lock that guards them.

The write path moves `durable_epoch`; the apply loop moves `applied_epoch` and steps the
graph; lookups read the graph (with the lock, or without it through the sequence counter);
the flusher reads and trims the tail; an install or a bulk load replaces the graph.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pomoview.planner.compile import CompiledProgram, ProgramGraph
from pomoview.server.errors import DeadlineExceeded, FailedPrecondition, OutOfRange
from pomoview.server.views.log_tail import LogTail
from pomoview.server.views.memory_budget import MemoryBudget
from pomoview.server.views.subscriptions import Subscriptions

log = logging.getLogger("pomoview.memory")


@dataclass(frozen=True)
class Published:
    """What a read without the lock may trust, replaced whole (one atomic assignment) at
    every change: while `seq` is odd an epoch is being applied and the readers' groups as of
    `epoch` (the last epoch applied) are their `before` versions (Reader.encoded_all); while it
    is even they are the groups themselves, at `epoch`."""

    seq: int
    epoch: int
    graph: ProgramGraph | None


@dataclass
class LockCount:
    """How many times one thread acquired the dataflow lock while it was counted."""

    count: int = 0


def holder_of(thread_name: str) -> str:
    """A thread's name without the number a pool or Python gives it: "grpc_3" and
    "upquery_0" are "grpc" and "upquery", "Thread-7 (run)" is "Thread" (a few labels)."""
    return thread_name.split("_")[0].split("-")[0].split(" ")[0] or "other"


class CountingLock:
    """A mutex that counts the current thread's acquisitions while `counting` is open (the
    probe of how often one lookup takes the dataflow lock). Outside a count it costs one
    attribute read per acquisition. A Condition built on it counts a `wait`'s re-acquisition
    too: that is a real acquisition."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        # Run with the lock held just before each release (a Condition's `wait` included).
        self.before_release: Callable[[], None] | None = None
        # Releases so far (a Condition's `wait` included), counted under the lock: a reading
        # taken under it holds as long as no other hold has ended since (graph_stats.py).
        self.releases = 0
        # Told each hold's length, with the lock held, at its release: (holder, seconds),
        # the holder the thread's name without its number (the server's metrics).
        self.on_hold: Callable[[str, float], None] | None = None
        self._since = 0.0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            self._since = time.perf_counter()
            counter: LockCount | None = getattr(self._local, "counter", None)
            if counter is not None:
                counter.count += 1
        return got

    def release(self) -> None:
        hook, on_hold = self.before_release, self.on_hold
        try:
            if hook is not None:
                hook()
            if on_hold is not None:
                on_hold(holder_of(threading.current_thread().name), time.perf_counter() - self._since)
        finally:
            self.releases += 1
            self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextlib.contextmanager
    def counting(self) -> Iterator[LockCount]:
        counter = LockCount()
        self._local.counter = counter
        try:
            yield counter
        finally:
            self._local.counter = None


# A recursive view's demanded rules read a source of at most this many rows whole (`serve
# --whole-source-rows`). bench/recursive_lookup.py at 100,000 edges: read whole, cold lookups
# took 84 ms (p50) after a first one of 3.3 s and 111 MiB; through slices, 1.5 s (5.5 keyed
# Spark jobs at about 250 ms each) and 6 MiB, and a write reaching unfetched nodes evicts.
DEFAULT_WHOLE_SOURCE_ROWS = 250_000


class WholeSources:
    """Which sources a recursive view's demanded rules read whole rather than through slices
    fetched by demand (planner/demand/readers.py): those the store counts at most `limit`
    rows of. A source it cannot count (a bulk load's parts on a remote store) is sliced,
    which is right for a large one and costs a small one a few keyed fetches."""

    def __init__(self, rows_at_most: Callable[[str], int | None], limit: int) -> None:
        self._rows_at_most = rows_at_most
        self.limit = limit

    def __call__(self, source: str) -> bool:
        rows = self._rows_at_most(source)
        return rows is not None and rows <= self.limit


class ViewState:
    """The program, its graph, the epochs and the log tail, under the dataflow lock `lock`.

    Everything here is read and written under `lock` (a Condition, notified whenever an
    epoch is applied or the epochs move), with two exceptions: the log's thread moves
    `durable_epoch` without it (only up), and lock-free hits read `seq`, `applied_epoch`
    and `graph` without it (see `seq`).

    Invariants:
    - `seq` is odd exactly while an epoch is being applied (`begin_apply` .. `end_apply`),
      and moves only under `lock`: by one at each end of an apply, by two whenever the
      graph is replaced or the epochs jump (`reset_graph`, `reset_at`). A read without the
      lock that saw the same even `seq` before and after saw the state at one applied epoch.
    - `tail.base <= applied_epoch <= durable_epoch`: a batch is applied only once durable,
      and the tail starts at or before what the dataflow has seen.
    - The tail holds every batch after the store's version (the flusher trims it only
      through a version the store has published) and after every version an upquery has
      pinned (`UpqueryPins`), but for a bulk load: its rows never pass through the log, so
      it moves the tail's base past the pins, and lookups fetch again any answer older than
      the base.
    The first two are asserted in debug runs (`_check`, `_parity`); the third by the
    flusher's trim.
    """

    def __init__(
        self,
        program: CompiledProgram | None,
        tail: LogTail,
        durable_epoch: int,
        subscriptions: Subscriptions,
        *,
        memory: MemoryBudget | None = None,
        full_state: bool = False,
        hold_whole: Callable[[str], bool] | None = None,
        binary_joins: bool = False,
        graph_dropped: Callable[[], None] | None = None,
    ) -> None:
        # The mutex under the Condition, kept to check that callers hold it, and to count
        # how often a thread takes it (`count_locks`).
        self._mutex = CountingLock()
        self.lock = threading.Condition(self._mutex)  # type: ignore[arg-type]
        self.subscriptions = subscriptions
        # Partial state is evicted when the process's memory grows past this (None: never).
        self.memory = memory
        # Every state full (no partial state): the comparison run of bench/partial_memory.py.
        self.full_state = full_state
        # Whether a recursive view's demanded rules read a source whole (ProgramGraph's;
        # None: every source whole).
        self.hold_whole = hold_whole
        # Every rule body a chain of binary joins, cyclic ones too (`serve --binary-joins`).
        self.binary_joins = binary_joins
        # Told when a graph is replaced: its cycles are garbage from then on (the server's
        # collector thaws what it froze, scheduler/gc_policy.py, so that they are freed).
        self._graph_dropped = graph_dropped
        self.program = program
        # The program's one dataflow graph; a new one at every install (built lazily).
        self.graph: ProgramGraph | None = None
        self.tail = tail
        self.durable_epoch = durable_epoch
        # No reader exists before the first lookup, so every logged batch counts as applied:
        # a reader built later reads it through the overlay.
        self.applied_epoch = durable_epoch
        # The sequence lock over the applied state, for reads without `lock` (see above).
        self.seq = 0
        self.published = Published(0, durable_epoch, None)
        self._apply_open = False  # between `begin_apply` and `end_apply`
        # An apply raised half way (the apply loop logs it): `seq` stayed odd, and every
        # later apply flips it the other way, so its parity is no longer checked.
        self._apply_failed = False
        with self.lock:
            self.reset_graph()
            self._check()

    def on_release(self, hook: Callable[[], None] | None) -> None:
        """Runs `hook` with the lock held before every release of it: whatever changed under
        the lock is seen by the hook before any other thread can see it (the hit replica's
        feed, server/replica/feed.py)."""
        self._mutex.before_release = hook

    def on_hold(self, hook: Callable[[str, float], None] | None) -> None:
        """Tells `hook(holder, seconds)` each hold of `lock` at its end (see CountingLock)."""
        self._mutex.on_hold = hook

    def lock_releases(self) -> int:
        """How many times `lock` was released so far (read without it: one int)."""
        return self._mutex.releases

    def count_locks(self) -> contextlib.AbstractContextManager[LockCount]:
        """Counts the current thread's acquisitions of `lock` inside the `with` block (tests
        and benchmarks: how many holds a lookup takes)."""
        return self._mutex.counting()

    def require_program(self) -> CompiledProgram:
        program = self.program
        if program is None:
            raise FailedPrecondition("no program is installed; call Install first")
        return program

    def reset_graph(self) -> None:
        """A new, empty graph for the program (caller holds the lock)."""
        assert self._mutex.locked()
        program, dropped = self.program, self.graph is not None
        self.graph = (
            None
            if program is None
            else ProgramGraph(
                program,
                partial=not self.full_state,
                hold_whole=self.hold_whole,
                binary_joins=self.binary_joins,
            )
        )
        self.subscriptions.reset("the dataflow was rebuilt (a program install, a bulk load or a failure)")
        if dropped and self._graph_dropped is not None:
            self._graph_dropped()
        # Even to even, after the new graph is in place: a lookup without the lock that
        # read the old graph sees the sequence move and takes the locked path.
        self.seq += 2
        self._publish()

    def begin_apply(self) -> None:
        """An epoch is being applied: lookups without the lock do not trust what they read
        until `end_apply` (caller holds the lock)."""
        assert self._mutex.locked()
        self._apply_failed |= self._apply_open
        self._parity(odd=False)
        self._apply_open = True
        self.seq += 1
        self._publish()
        if self.graph is not None:
            # From here the readers keep each changed key's group as of the last epoch.
            self.graph.graph.open_step()

    def end_apply(self, epoch: int) -> None:
        """`epoch` is applied (caller holds the lock; it notifies the waiters after)."""
        self._parity(odd=True)
        self.applied_epoch = epoch
        self.seq += 1
        self._publish()  # the new epoch, all at once: then the old versions can go
        if self.graph is not None:
            self.graph.graph.publish()
        self._apply_open = False
        self._check()

    def reset_at(self, epoch: int) -> None:
        """Moves the applied and durable epochs to `epoch` past the dataflow (a bulk load,
        which the store has published as version `epoch`): the tail and the graph start
        over there. Caller holds the lock."""
        self.tail.trim_through(epoch)
        self.reset_graph()
        self.durable_epoch = self.applied_epoch = epoch
        self.seq += 2  # the epoch moved too: no lock-free read spans it
        self._publish()
        self._apply_failed |= self._apply_open
        self._check()
        self.lock.notify_all()

    def load_at(self, epoch: int, keep: Callable[[ProgramGraph], bool]) -> None:
        """Moves the applied and durable epochs to `epoch` past the dataflow (a bulk load,
        which the store has published as version `epoch`), keeping the graph if `keep(graph)`
        brought it up to date (it evicts what the load touched), else starting a new one.
        Caller holds the lock."""
        graph = self.graph
        if graph is None or not keep(graph):
            self.reset_at(epoch)
            return
        self.tail.trim_through(epoch)
        self.durable_epoch = self.applied_epoch = epoch
        self.seq += 2  # the epoch moved: no lock-free read spans it
        self._publish()
        self._apply_failed |= self._apply_open
        self._check()
        self.lock.notify_all()

    def wait_applied(self, min_epoch: int, deadline: float | None) -> None:
        """Waits until `min_epoch` is applied, at the latest until `deadline` (monotonic)."""
        with self.lock:
            if min_epoch > self.durable_epoch:
                raise OutOfRange(
                    f"min_epoch {min_epoch} is ahead of the last committed epoch {self.durable_epoch}"
                )
            while self.applied_epoch < min_epoch:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise DeadlineExceeded(f"epoch {min_epoch} was not applied in time")
                self.lock.wait(timeout=remaining)

    def enforce_budget(self) -> None:
        """Evicts partial state when the process's memory is over the budget, as of the
        memory thread's last sample (caller holds the lock; memory_budget.py says when,
        dataflow/state/eviction.py what)."""
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

    def _publish(self) -> None:
        self.published = Published(self.seq, self.applied_epoch, self.graph)

    def _check(self) -> None:
        if __debug__:
            assert self._mutex.locked()
            self._parity(odd=False)
            assert self.tail.base <= self.applied_epoch <= self.durable_epoch, (
                self.tail.base, self.applied_epoch, self.durable_epoch
            )

    def _parity(self, *, odd: bool) -> None:
        assert self._apply_failed or bool(self.seq & 1) == odd, (self.seq, "odd" if odd else "even")
