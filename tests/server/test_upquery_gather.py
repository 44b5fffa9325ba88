"""How an upquery job gathers the misses of a burst (`UpqueryJobs._gather`), without Spark:
`run` records each job's keys, so the tests see exactly which misses shared a job."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pomoview.dataflow.node import FetchRequest
from pomoview.server.reads import upquery_jobs
from pomoview.server.reads.upquery_jobs import UpqueryJobs


class Recorder:
    def __init__(self) -> None:
        self.jobs: list[tuple[int, ...]] = []

    def run(self, request: FetchRequest, pin: object) -> object:
        self.jobs.append(tuple(k[0] for k in request.keys))  # type: ignore[misc]
        return request.keys


def _jobs(linger: float, max_linger: float) -> tuple[UpqueryJobs, Recorder]:
    recorder = Recorder()
    jobs = UpqueryJobs(recorder.run, lambda: None, lambda pin: None, linger=linger, max_linger=max_linger)
    return jobs, recorder


def _miss(jobs: UpqueryJobs, key: int) -> Any:
    [ticket] = jobs.submit([FetchRequest("vote", ("article_id",), ((key,),))])
    return ticket


def test_misses_that_keep_arriving_within_the_quiet_spell_share_one_job() -> None:
    jobs, rec = _jobs(linger=0.3, max_linger=5.0)
    tickets = []
    for key in range(6):  # 0.1 s apart, well within the 0.3 s quiet spell, 0.5 s in all
        tickets.append(_miss(jobs, key))
        time.sleep(0.1)
    for t in tickets:
        t.wait()
    assert rec.jobs == [(0, 1, 2, 3, 4, 5)]
    jobs.close()


def test_a_quiet_spell_closes_the_job_and_later_misses_take_the_next() -> None:
    jobs, rec = _jobs(linger=0.1, max_linger=5.0)
    first = _miss(jobs, 1)
    first.wait()  # it ran after 0.1 s without another miss
    second = _miss(jobs, 2)
    second.wait()
    assert rec.jobs == [(1,), (2,)]
    jobs.close()


def test_max_linger_caps_the_gathering_of_a_steady_stream() -> None:
    jobs, rec = _jobs(linger=0.2, max_linger=0.5)
    tickets = []
    started = time.monotonic()
    while time.monotonic() - started < 1.5:  # a miss every 50 ms, never quiet for 0.2 s
        tickets.append(_miss(jobs, len(tickets)))
        time.sleep(0.05)
    for t in tickets:
        t.wait()
    assert len(rec.jobs) >= 2, "a steady stream must not hold the first job back forever"
    assert len(rec.jobs[0]) < len(tickets)
    assert sorted(k for job in rec.jobs for k in job) == list(range(len(tickets)))
    jobs.close()


def test_a_stall_of_the_whole_process_does_not_count_as_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gatherer's first sleep overshoots by far (as in a garbage collection, when no miss
    can arrive either); a miss that comes right after the stall still joins the job."""
    real_sleep = time.sleep
    stalled = threading.Event()
    calls = [0]

    class StallingTime:
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            calls[0] += 1
            if calls[0] == 1:
                real_sleep(seconds + 1.0)
                stalled.set()
            else:
                real_sleep(seconds)

    monkeypatch.setattr(upquery_jobs, "time", StallingTime)
    jobs, rec = _jobs(linger=0.5, max_linger=5.0)
    first = _miss(jobs, 1)
    assert stalled.wait(10)
    real_sleep(0.05)
    second = _miss(jobs, 2)
    first.wait()
    second.wait()
    assert rec.jobs == [(1, 2)]
    jobs.close()
