"""How an upquery job gathers the misses of a burst (`UpqueryJobs._gather`), without Spark:
`run` records each job's keys, so the tests see exactly which misses shared a job.

Time is the test's: `Clock` stands in for the module's `time` (the module reads the clock
and sleeps only through it), so a "quiet spell" is one the test makes by moving the clock,
and every step waits on the gatherer's own progress (asleep, or its job run), never on a
real sleep. Ties are resolved one way throughout: when the test moves the clock to t, the
gatherer looks at t first, then the test's misses at t arrive."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pomoview.dataflow.node import FetchRequest
from pomoview.server.reads import upquery_jobs
from pomoview.server.reads.upquery_jobs import UpqueryJobs

WAIT = 60.0  # real seconds any step may take on a loaded machine before the test fails


class Clock:
    """`monotonic()` and `sleep()` for upquery_jobs, on a virtual time that only `advance_to`
    moves. A gatherer's `sleep(s)` blocks until the test has moved the clock s further."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.now = 0.0
        self._sleeping: float | None = None  # when the sleeping gatherer wakes
        self._awake = False  # a gatherer was woken and has neither slept again nor run its job

    def monotonic(self) -> float:
        with self._cond:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._cond:
            wake = self.now + seconds
            self._sleeping, self._awake = wake, False
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self.now >= wake, timeout=WAIT):
                raise AssertionError(f"the test never moved the clock to {wake}")
            self._sleeping, self._awake = None, True

    def ran(self) -> None:
        """Called by the job's `run`: the gatherer that woke has finished gathering."""
        with self._cond:
            self._awake = False
            self._cond.notify_all()

    def advance_to(self, t: float) -> None:
        """Moves the clock to `t`, then waits until the gatherer has looked at it: asleep
        again until a later time, or its job run."""
        with self._cond:
            assert t >= self.now
            self.now = t
            self._cond.notify_all()
            settled = self._cond.wait_for(
                lambda: not self._awake and (self._sleeping is None or self._sleeping > self.now),
                timeout=WAIT,
            )
            assert settled, f"the gatherer did not settle at {t}"

    def wait_asleep(self) -> None:
        """Waits until a job's gatherer (just started) sleeps, waiting for later misses."""
        with self._cond:
            asleep = self._cond.wait_for(
                lambda: self._sleeping is not None and self._sleeping > self.now, timeout=WAIT
            )
            assert asleep, "no gatherer went to sleep"

    def release(self) -> None:
        """Lets any gatherer still asleep go (a failed test's)."""
        with self._cond:
            self.now = float("inf")
            self._cond.notify_all()


class Recorder:
    def __init__(self, clock: Clock) -> None:
        self.jobs: list[tuple[int, ...]] = []
        self._clock = clock

    def run(self, request: FetchRequest, pin: object) -> object:
        self.jobs.append(tuple(k[0] for k in request.keys))  # type: ignore[misc]
        self._clock.ran()
        return request.keys


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    c = Clock()
    monkeypatch.setattr(upquery_jobs, "time", c)
    yield c
    c.release()


def _jobs(clock: Clock, linger: float, max_linger: float) -> tuple[UpqueryJobs, Recorder]:
    recorder = Recorder(clock)
    jobs = UpqueryJobs(recorder.run, lambda: None, lambda pin: None, linger=linger, max_linger=max_linger)
    return jobs, recorder


def _miss(jobs: UpqueryJobs, key: int) -> Any:
    [ticket] = jobs.submit([FetchRequest("vote", ("article_id",), ((key,),))])
    return ticket


def test_misses_that_keep_arriving_within_the_quiet_spell_share_one_job(clock: Clock) -> None:
    jobs, rec = _jobs(clock, linger=3.0, max_linger=50.0)
    tickets = [_miss(jobs, 0)]
    clock.wait_asleep()
    for key in range(1, 6):  # 1 s apart, within the 3 s quiet spell, 5 s in all
        clock.advance_to(float(key))
        tickets.append(_miss(jobs, key))
    # The last miss came at 5: the job gathers until 8, not a moment less.
    clock.advance_to(7.999)
    assert rec.jobs == []
    clock.advance_to(8.0)
    assert rec.jobs == [(0, 1, 2, 3, 4, 5)]
    for t in tickets:
        t.wait()
    jobs.close()


def test_a_quiet_spell_closes_the_job_and_later_misses_take_the_next(clock: Clock) -> None:
    jobs, rec = _jobs(clock, linger=1.0, max_linger=50.0)
    first = _miss(jobs, 1)
    clock.wait_asleep()
    clock.advance_to(1.0)  # 1 s without another miss
    assert rec.jobs == [(1,)]
    first.wait()
    second = _miss(jobs, 2)  # after the quiet spell: a job of its own
    clock.wait_asleep()
    clock.advance_to(2.0)
    assert rec.jobs == [(1,), (2,)]
    second.wait()
    jobs.close()


def test_max_linger_caps_the_gathering_of_a_steady_stream(clock: Clock) -> None:
    """A miss every second, never quiet for the 2 s linger: each job still closes 5 s
    (max_linger) after it started, and the misses from then on go to the next one."""
    jobs, rec = _jobs(clock, linger=2.0, max_linger=5.0)
    tickets = [_miss(jobs, 0)]
    clock.wait_asleep()
    for key in range(1, 11):
        clock.advance_to(float(key))
        tickets.append(_miss(jobs, key))
        if key in (5, 10):  # a job closed at this time; this miss starts (or queues) the next
            clock.wait_asleep()
    clock.advance_to(12.0)  # the stream stops: the last job closes after a quiet spell
    assert rec.jobs == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9), (10,)]
    for t in tickets:
        t.wait()
    jobs.close()


def test_a_stall_of_the_whole_process_does_not_count_as_quiet(clock: Clock) -> None:
    """The gatherer's first sleep overshoots by far (as in a garbage collection, when no miss
    can arrive either); a miss that comes right after the stall still joins the job."""
    jobs, rec = _jobs(clock, linger=2.0, max_linger=50.0)
    first = _miss(jobs, 1)
    clock.wait_asleep()  # until 2
    clock.advance_to(4.0)  # it wakes 2 s late, more than half the linger: a stall
    assert rec.jobs == []
    second = _miss(jobs, 2)
    clock.advance_to(6.0)  # a real quiet spell, counted from the end of the stall
    assert rec.jobs == [(1, 2)]
    first.wait()
    second.wait()
    jobs.close()
