"""Coalesced upqueries: at most one keyed Spark job at a time per channel (a source, the
columns it is asked by, its filters and its window, if any); misses that arrive while it runs go together into
the channel's next job, and a miss whose keys the running job already fetches waits for it.

A job gathers before its Spark job runs: it takes the keys of every miss that arrives until
none has for `linger` seconds, or `max_linger` after it started. A burst of misses (a page
of 100 lookups arriving over some tens of milliseconds through gRPC) then goes into one job,
while a lone miss waits only `linger`.

So 100 lookups that miss at once on one source cost two Spark jobs (the first miss's, then
one for the other 99), not 100; and 100 lookups of one cold key cost one.

Snapshots: a job pins the store when it starts (`UpqueryPins.pin`, which also keeps the log
tail after that version: see `Lookups._fetch_from`). Its answer is used by every lookup that
waited on it, in rounds after the job has ended, so the pin is reference counted: the job
holds one reference while it runs and each waiting lookup one until the lookup ends
(`Ticket.release`). The last release unpins.

Invariants (asserted in `_check`, in debug runs):
- a channel has a queued job only while it has a running one;
- a job's keys do not change once its Spark job runs (only while it gathers: `linger`
  seconds after it starts, so that misses that arrive in a burst share its job).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pomoview.dataflow.node import FetchRequest, Filters, Window
from pomoview.dataflow.state.keyed_state import Key

Channel = tuple[str, tuple[str, ...], Filters, Window | None]


@dataclass(eq=False)
class _Job:
    channel: Channel
    keys: dict[Key, None]  # insertion ordered, so a job's key list is deterministic
    running: bool = False
    gathering: bool = False  # started but lingering: it still takes keys
    joined: float = 0.0  # when a miss last joined it while it gathered (monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    answer: object = None
    error: BaseException | None = None
    refs: int = 1  # the job's own, released when it ends; one more per waiting lookup
    pin: object = None


@dataclass
class _ChannelState:
    running: _Job | None = None
    queued: _Job | None = None


class Ticket:
    """A lookup's share in one job: `wait()` for the answer, `release()` when the lookup
    no longer reads it (its pin may then go)."""

    def __init__(self, jobs: UpqueryJobs, job: _Job) -> None:
        self._jobs = jobs
        self._job = job
        self._released = False

    def wait(self) -> object:
        self._job.done.wait()
        if self._job.error is not None:
            raise self._job.error
        return self._job.answer

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._jobs._release(self._job)


class UpqueryJobs:
    """Runs keyed fetches through `run(request, pin) -> answer`, coalesced per channel.

    `pin()` pins the store's current snapshot for a job and `unpin(pin)` releases it.
    `run` raises to fail every lookup waiting on the job; nothing is retried here (the
    lookups' next round asks again).
    """

    def __init__(
        self,
        run: Callable[[FetchRequest, object], object],
        pin: Callable[[], object],
        unpin: Callable[[object], None],
        *,
        max_parallel: int = 8,
        linger: float = 0.0,
        max_linger: float = 0.0,
    ) -> None:
        self._run = run
        self.linger = linger
        self.max_linger = max_linger
        self._pin = pin
        self._unpin = unpin
        self._lock = threading.Lock()
        self._channels: dict[Channel, _ChannelState] = {}
        self._pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="upquery")
        self.jobs_started = 0

    def submit(self, requests: Sequence[FetchRequest]) -> list[Ticket]:
        """Tickets for the jobs that fetch `requests` (one per request), started or queued."""
        tickets = []
        start: list[_Job] = []
        with self._lock:
            for request in requests:
                channel = (request.source, request.columns, request.filters, request.window)
                state = self._channels.setdefault(channel, _ChannelState())
                job = state.running
                if job is not None and job.gathering:
                    job.keys.update(dict.fromkeys(request.keys))
                    job.joined = time.monotonic()
                elif job is not None and all(k in job.keys for k in request.keys):
                    pass  # the running job fetches every key already
                elif job is not None:
                    if state.queued is None:
                        state.queued = _Job(channel, {})
                    job = state.queued
                    job.keys.update(dict.fromkeys(request.keys))
                else:
                    job = state.running = _Job(
                        channel,
                        dict.fromkeys(request.keys),
                        running=True,
                        gathering=self.linger > 0,
                        joined=time.monotonic(),
                    )
                    start.append(job)
                job.refs += 1
                tickets.append(Ticket(self, job))
            self._check()
        for job in start:
            self._start(job)
        return tickets

    def _start(self, job: _Job) -> None:
        self.jobs_started += 1
        self._pool.submit(self._execute, job)

    def _execute(self, job: _Job) -> None:
        source, columns, filters, window = job.channel
        if self.linger:
            self._gather(job)
        try:
            job.pin = self._pin()
            job.answer = self._run(FetchRequest(source, columns, tuple(job.keys), filters, window), job.pin)
        except BaseException as err:  # handed to every waiting lookup
            job.error = err
        follow: _Job | None = None
        with self._lock:
            state = self._channels[job.channel]
            assert state.running is job
            follow = state.running = state.queued
            state.queued = None
            if follow is not None:
                follow.running = True
                follow.gathering = self.linger > 0
                follow.joined = time.monotonic()
            else:
                del self._channels[job.channel]
            self._check()
        job.done.set()
        self._release(job)
        if follow is not None:
            self._start(follow)

    def _gather(self, job: _Job) -> None:
        """Lets misses join `job` until none has for `linger`, or `max_linger` since now.

        A quiet spell counts only while this thread was awake to see it: a sleep that
        overshoots by more than half of `linger` means the whole process stalled (a garbage
        collection, a thread holding the GIL), and the misses of the burst could not arrive
        meanwhile either (measured: a 34 ms stall split a burst of 100 into two jobs)."""
        started = time.monotonic()
        deadline = started + max(self.linger, self.max_linger)
        awake = started  # since when this thread has been able to watch for misses
        while True:
            with self._lock:
                now = time.monotonic()
                until = min(max(job.joined, awake) + self.linger, deadline)
                if now >= until:
                    job.gathering = False
                    return
            time.sleep(until - now)
            woke = time.monotonic()
            if woke - until > self.linger / 2:
                awake = woke

    def _release(self, job: _Job) -> None:
        with self._lock:
            job.refs -= 1
            last = job.refs == 0
        if last and job.pin is not None:
            self._unpin(job.pin)

    def _check(self) -> None:
        if __debug__:
            for state in self._channels.values():
                assert state.running is not None, "a channel is idle but kept"
                assert state.running.running, "a channel's running job is marked queued"
                assert state.queued is None or not state.queued.running, "a queued job runs"
                assert state.queued is None or not state.running.gathering, "queued behind a gathering job"

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=False)
