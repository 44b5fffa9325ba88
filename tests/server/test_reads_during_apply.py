"""Reads never wait for an apply, the backlog is applied as one step, and writers wait
when the views fall too far behind (server/scheduler/applier.py, server/views/view_state.py,
dataflow/operators/reader.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VIEW, VOTES, encode, row


def in_thread(fn: Callable[[], Any], timeout: float = 30) -> Any:
    """`fn()` on another thread; fails if it does not return within `timeout` (a read that
    waited for the held apply would never return)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert out, f"{fn} did not return in {timeout} s"
    return out[0]


@pytest.fixture
def scheduler(tmp_path: Path, spark: Any) -> Iterator[Scheduler]:
    # No backpressure to speak of: these tests hold steps for as long as they need.
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600, max_apply_lag=600)
    s.start()
    try:
        yield s
    finally:
        s.stop()


def gate_reader(s: Scheduler, *, after_change: bool = True) -> tuple[threading.Event, threading.Event]:
    """Holds every later step inside the vote view's reader until `gate` is set, `entered`
    set once a step is there: after the reader changed its groups (the step not published
    yet) when `after_change`, else before it changes them."""
    graph = s.graph
    assert graph is not None
    reader = graph.graph.readers[(VIEW, ("id",))]
    entered, gate = threading.Event(), threading.Event()
    real = reader.on_delta

    def gated(port: int, delta: Any) -> Any:
        out = real(port, delta) if after_change else None
        entered.set()
        assert gate.wait(60)
        return out if after_change else real(port, delta)

    reader.on_delta = gated  # type: ignore[method-assign]
    return entered, gate


def test_hits_answer_the_published_epoch_while_a_step_is_held_half_done(scheduler: Scheduler) -> None:
    """A gate inside the apply, after the reader changed its groups and before the step is
    published: hits (which take no lock: the apply holds it) answer the previous epoch, and
    say so; a lookup with `min_epoch` of the held epoch waits for it; once the gate opens,
    hits answer the new epoch."""
    s = scheduler
    s.install(VOTES)
    first = s.write([("article", [row(id=1, title="a"), row(id=2, title="b")], []),
                     ("vote", [row(article_id=1, user_id=7), row(article_id=1, user_id=8)], [])])
    s.lookup(VIEW, [row(id=1), row(id=2)], min_epoch=first)
    entered, gate = gate_reader(s)  # the groups changed, the step not published
    second: list[int] = []
    writer = threading.Thread(
        target=lambda: second.append(s.write([("vote", [row(article_id=1, user_id=9)], [])]))
    )
    writer.start()
    try:
        assert entered.wait(60)
        hit = in_thread(lambda: s.hits(VIEW, [row(id=1), row(id=2)], None, encode))
        assert hit is not None, "a hit fell back to the locked path during the step"
        assert hit == ([encode([(1, "a", 2)]), encode([(2, "b", 0)])], first)
        writer.join(60)  # acknowledged (durable) before it is applied
        assert second and second[0] > first
        # A read at the held epoch waits for it, and only for it.
        assert s.hits(VIEW, [row(id=1)], second[0], encode) is None
        waiting = threading.Thread(target=lambda: s.lookup(VIEW, [row(id=1)], min_epoch=second[0]))
        waiting.start()
    finally:
        gate.set()
    waiting.join(60)
    assert not waiting.is_alive()
    assert s.hits(VIEW, [row(id=1)], None, encode) == ([encode([(1, "a", 3)])], second[0])


def test_a_backlog_is_applied_in_few_steps(scheduler: Scheduler) -> None:
    """Writes queued behind a held step are applied together: one step for the whole run,
    whose answer holds every write."""
    s = scheduler
    s.install(VOTES)
    first = s.write([("article", [row(id=1, title="a")], [])])
    s.lookup(VIEW, [row(id=1)], min_epoch=first)
    entered, gate = gate_reader(s, after_change=False)
    held = threading.Thread(target=lambda: s.write([("vote", [row(article_id=1, user_id=0)], [])]))
    held.start()
    try:
        assert entered.wait(60)
        steps = s.applier.steps
        epochs = [s.write([("vote", [row(article_id=1, user_id=u)], [])]) for u in range(1, 41)]
    finally:
        gate.set()
    held.join(60)
    got, epoch = s.lookup(VIEW, [row(id=1)], min_epoch=epochs[-1])
    assert got == [[{"id": 1, "title": "a", "votes": 41}]] and epoch >= epochs[-1]
    # The held step, then the 40 queued batches: far fewer steps than batches.
    assert s.applier.steps - steps <= 3, s.applier.steps - steps


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Polls a condition another thread (or the clock) makes true, with a deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not seen in {timeout} s: {what}"
        time.sleep(0.001)


@pytest.mark.parametrize("patient", [True, False], ids=["admitted-when-applied", "refused-after-waiting"])
def test_a_writer_waits_while_the_views_are_too_far_behind(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch, patient: bool
) -> None:
    """A step held by a gate: once the batch it applies is older than the bound, the next
    write waits before it takes an epoch (nothing is committed meanwhile). When the step is
    let go, the write goes through; when it is not, the write is refused with UNAVAILABLE,
    and still nothing was committed."""
    from pomoview.server.errors import Unavailable
    from pomoview.server.scheduler import applier

    monkeypatch.setattr(applier, "MAX_ROOM_WAIT", 60.0 if patient else 1.0)
    bound = 0.05
    s = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600, max_apply_lag=bound)
    s.start()
    gate = threading.Event()
    try:
        s.install(VOTES)
        first = s.write([("article", [row(id=1, title="a")], [])])
        s.lookup(VIEW, [row(id=1)], min_epoch=first)
        graph = s.graph
        assert graph is not None
        real_step = graph.step
        entered = threading.Event()

        def gated(changes: Any) -> None:
            entered.set()
            released.append(gate.wait(60))
            real_step(changes)

        released: list[bool] = []  # whether the gate let the step go (False: it timed out)
        graph.step = gated  # type: ignore[method-assign]
        held = s.write([("vote", [row(article_id=1, user_id=1)], [])])
        assert entered.wait(60)
        wait_until(lambda: s.applier.lag() > bound, "the held batch older than the bound")
        outcome: list[Any] = []

        def write() -> None:
            try:
                outcome.append(s.write([("vote", [row(article_id=1, user_id=2)], [])]))
            except Unavailable as err:
                outcome.append(err)

        writer = threading.Thread(target=write)
        writer.start()
        if patient:
            wait_until(lambda: s.applier.waiting == 1, "the writer waiting for room")
            # Read without the dataflow lock (Stats takes it, and the held step has it).
            assert not outcome and s.view_state.durable_epoch == held  # no epoch taken
            gate.set()
            writer.join(60)
            assert outcome == [held + 1]
            got, _ = s.lookup(VIEW, [row(id=1)], min_epoch=held + 1)
            assert got == [[{"id": 1, "title": "a", "votes": 2}]]
        else:
            writer.join(60)
            [err] = outcome
            assert isinstance(err, Unavailable) and "--max-apply-lag" in str(err), err
            assert s.view_state.durable_epoch == held  # nothing was committed
            gate.set()
            got, _ = s.lookup(VIEW, [row(id=1)], min_epoch=held)
            assert got == [[{"id": 1, "title": "a", "votes": 1}]]
        # Every held step was let go by the test, none by the gate's timeout (a read that
        # took the dataflow lock meanwhile would have waited for that timeout).
        assert released and all(released), released
    finally:
        gate.set()
        s.stop()


def test_stats_answers_at_once_while_a_step_holds_the_dataflow(scheduler: Scheduler) -> None:
    """Stats (server/scheduler/graph_stats.py) while a gate holds a step: it answers without
    the lock, with the last reading of the graph and the epoch it is of, and the live
    epochs; a reading asked for during a step is left by the apply at the step's end, and
    the next steps, unasked, leave none; a reading that an other hold has outdated (a
    lookup's fill) is never answered: the call waits for the step instead."""
    s = scheduler
    s.install(VOTES)
    first = s.write([("article", [row(id=i, title=str(i)) for i in (1, 2, 3)], []),
                     ("vote", [row(article_id=1, user_id=7)], [])])
    s.lookup(VIEW, [row(id=1), row(id=2)], min_epoch=first)

    def present(stats: Any) -> int:
        [info] = [r for r in stats.readers if r.view == VIEW]
        return int(info.present_keys)

    before = s.stats()  # the lock is free: a reading now
    assert (before.states_epoch, present(before)) == (first, 2)
    entered, gate = gate_reader(s)

    def held_write(user: int) -> tuple[threading.Thread, list[int]]:
        entered.clear()
        gate.clear()
        epochs: list[int] = []
        vote = [("vote", [row(article_id=1, user_id=user)], [])]
        writer = threading.Thread(target=lambda: epochs.append(s.write(vote)))
        writer.start()
        assert entered.wait(60)
        writer.join(60)  # acknowledged, not applied
        return writer, epochs

    try:
        _, [second] = held_write(8)
        during = in_thread(s.stats)  # the old Stats waited here for the gate
        assert (during.applied_epoch, during.durable_epoch, during.states_epoch) == (first, second, first)
        assert during.states == before.states and present(during) == 2
        gate.set()  # the step ends, and leaves a reading: a Stats call wanted one
        s.lookup(VIEW, [row(id=1)], min_epoch=second)
        assert s.graph_stats.taken_by_apply == 1
        # Asked once, left once: the steps after it take no reading nobody asked for.
        for user in (10, 11):
            s.lookup(VIEW, [row(id=1)], min_epoch=s.write([("vote", [row(article_id=1, user_id=user)], [])]))
        assert s.graph_stats.taken_by_apply == 1

        s.lookup(VIEW, [row(id=3)])  # a fill: a hold that outdates every earlier reading
        last = s.graph_stats.last
        assert last is not None and not s.graph_stats.holds(last)
        _, [third] = held_write(9)
        tries = s.graph_stats.busy_tries
        late: list[Any] = []
        caller = threading.Thread(target=lambda: late.append(s.stats()))
        caller.start()
        wait_until(lambda: s.graph_stats.busy_tries > tries, "Stats finding the dataflow held")
        assert not late  # the outdated reading is not answered
    finally:
        gate.set()
    caller.join(60)
    [after] = late
    assert after.states_epoch == third and present(after) == 3


def test_the_dataflow_lock_holds_are_measured_by_holder(scheduler: Scheduler) -> None:
    """`pomoview_dataflow_lock_hold_seconds` (server/metrics/metrics.py): a step held by a
    gate counts under "dataflow" for at least as long as the test saw it held; a lookup's
    rounds count under the looking-up thread's name without its number."""
    s = scheduler
    s.install(VOTES)
    first = s.write([("article", [row(id=1, title="a")], [])])
    in_thread(lambda: s.lookup(VIEW, [row(id=1)], min_epoch=first))
    registry = s.metrics.registry

    def held(holder: str, what: str) -> float:
        value = registry.get_sample_value(f"pomoview_dataflow_lock_hold_seconds_{what}", {"holder": holder})
        return 0.0 if value is None else value

    assert held("Thread", "count") >= 1  # in_thread's "Thread-N (<lambda>)"
    entered, gate = gate_reader(s)
    before = held("dataflow", "sum")
    writer = threading.Thread(target=lambda: s.write([("vote", [row(article_id=1, user_id=1)], [])]))
    writer.start()
    assert entered.wait(60)
    seen = time.perf_counter()
    assert s.hits(VIEW, [row(id=1)], None, encode) is not None  # the step is still held
    shown = time.perf_counter() - seen
    gate.set()
    writer.join(60)
    in_thread(lambda: s.lookup(VIEW, [row(id=1)], min_epoch=first + 1))  # the step has ended
    assert held("dataflow", "sum") - before >= shown


def test_a_steps_batches_leave_the_lag_when_its_epoch_is_published(scheduler: Scheduler) -> None:
    """The apply lag is the age of the oldest durable batch not yet applied: a step's
    batches count until the view publishes its epoch, not until the step's last chores
    (a gate holds the step at its lock's release, after the publish)."""
    s = scheduler
    s.install(VOTES)
    first = s.write([("article", [row(id=1, title="a")], [])])
    s.lookup(VIEW, [row(id=1)], min_epoch=first)
    s.stats()  # a reading of the graph, which Stats answers while the step holds the lock
    entered, gate = threading.Event(), threading.Event()

    def hold() -> None:
        if threading.current_thread().name == "dataflow" and not gate.is_set():
            entered.set()
            assert gate.wait(60)

    s.view_state.on_release(hold)
    try:
        epoch = s.write([("vote", [row(article_id=1, user_id=1)], [])])
        assert entered.wait(60)
        assert s.view_state.applied_epoch == epoch  # published, the step not ended
        stats = s.stats()
        assert (stats.applied_epoch, stats.durable_epoch, stats.apply_lag_epochs) == (epoch, epoch, 0)
        assert s.applier.lag() == 0.0 and stats.apply_lag_seconds == 0.0
    finally:
        gate.set()
        s.view_state.on_release(None)


def test_stats_on_a_quiet_server_answers_with_the_reading_that_still_holds(scheduler: Scheduler) -> None:
    """A Stats call that gets the dataflow lock and finds the last reading still holding (no
    other hold of the lock has ended since) answers with it rather than walking every state
    again; once another hold has ended (a lookup's fill), the next call takes a new reading,
    which sees what that hold changed."""
    s = scheduler
    s.install(VOTES)
    first = s.write([("article", [row(id=i, title=str(i)) for i in (1, 2)], [])])
    s.lookup(VIEW, [row(id=1)], min_epoch=first)
    s.stats()
    reading = s.graph_stats.last
    again = s.stats()
    assert s.graph_stats.last is reading  # the same object: not taken again
    [info] = [r for r in again.readers if r.view == VIEW]
    assert int(info.present_keys) == 1
    s.lookup(VIEW, [row(id=2)])  # a fill: a hold that outdates the reading
    after = s.stats()
    assert s.graph_stats.last is not reading
    [info] = [r for r in after.readers if r.view == VIEW]
    assert int(info.present_keys) == 2
