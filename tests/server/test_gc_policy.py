"""server/scheduler/gc_policy.py: GcPauses reports each collection's generation and pause
while started, and nothing once stopped; freeze_at_start moves what is alive into the
permanent generation, which collections no longer walk, and makes full collections rarer."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pomoview.server.scheduler.gc_policy import (
    FULL_COLLECTION_EVERY,
    REFREEZE,
    THAW_EVERY,
    THAW_EVERY_MAX,
    THAW_PAYS,
    GcPauses,
    Refreeze,
    freeze_at_start,
)
from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VIEW, VOTES, row


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The test process's objects back into the collected generations afterwards, and its
    thresholds as they were."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        REFREEZE.stop()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_each_collection_is_reported_with_its_generation_and_pause() -> None:
    seen: list[tuple[int, float]] = []
    pauses = GcPauses(lambda generation, seconds: seen.append((generation, seconds)))
    pauses.start()
    pauses.start()  # twice: still one callback
    try:
        for generation in (0, 1, 2):
            started = time.perf_counter()
            gc.collect(generation)
            took = time.perf_counter() - started
            assert seen[-1][0] == generation
            assert 0 < seen[-1][1] <= took
        assert len(seen) == 3
    finally:
        pauses.stop()
    gc.collect()
    assert len(seen) == 3, "a stopped GcPauses reported a collection"


def test_what_is_alive_at_start_is_frozen_and_no_longer_walked(unfrozen: None) -> None:
    kept = [[i] for i in range(1000)]  # tracked containers, alive at "start"
    assert gc.is_tracked(kept[0])
    frozen = freeze_at_start()
    # Not equal: a frozen object that dies (another thread's, such as the test runner's)
    # leaves the permanent generation, so its count can only fall after the freeze.
    assert frozen >= gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold()[2] == FULL_COLLECTION_EVERY
    walked = {id(o) for o in gc.get_objects()}  # generations 0-2, not the permanent one
    assert id(kept) not in walked and id(kept[0]) not in walked
    later = [0]
    assert id(later) in {id(o) for o in gc.get_objects()}


class Node:
    """A tracked object that can sit in a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def dead_frozen_cycles(n: int) -> list[weakref.ref[Node]]:
    """`n` cycles of two nodes, frozen by a full collection while alive, then dropped: no
    collection frees them until a thaw. Weak references to one node of each."""
    cycles = [(Node(), Node()) for _ in range(n)]
    for a, b in cycles:
        a.other, b.other = b, a
    refs = [weakref.ref(a) for a, _ in cycles]
    gc.collect()  # frozen now
    del cycles, a, b
    return refs


def test_each_full_collection_freezes_its_survivors_and_a_thaw_frees_cycles_that_died_frozen(
    unfrozen: None,
) -> None:
    REFREEZE.stop()
    refreeze = Refreeze()
    refreeze.start()
    try:
        gc.collect()  # the first full collection freezes what survives it
        survivor = [[i] for i in range(100)]  # made since: walked by the next
        walked = {id(o) for o in gc.get_objects()}
        assert id(survivor) in walked
        gc.collect()
        assert id(survivor) not in {id(o) for o in gc.get_objects()}, "a survivor still walked"
        [gone] = dead_frozen_cycles(1)
        assert refreeze.full == 3 and not refreeze.thawing
        for _ in range(refreeze.full, THAW_EVERY - 1):
            gc.collect()
            assert gone() is not None, "a frozen cycle was collected before a thaw"
        assert refreeze.thawing
        gc.collect()  # the THAW_EVERY-th: walks everything
        assert gone() is None, "a cycle that died frozen outlived the thaw"
    finally:
        refreeze.stop()


def test_thaws_that_free_little_come_ever_more_rarely_and_one_that_pays_brings_them_back(
    unfrozen: None,
) -> None:
    """The interval between thaws doubles after each that frees fewer than THAW_PAYS
    objects, up to THAW_EVERY_MAX, and a thaw that frees more sets it back."""
    REFREEZE.stop()
    gc.unfreeze()
    gc.collect()  # the garbage of earlier tests is not this test's thaws' to free
    refreeze = Refreeze()
    refreeze.start()

    def collections_to_thaw() -> int:
        done = 0
        while not refreeze.thawing:
            gc.collect()
            done += 1
        gc.collect()  # the thaw
        return done + 1

    try:
        assert collections_to_thaw() == THAW_EVERY
        assert refreeze.last_freed < THAW_PAYS
        interval = THAW_EVERY
        while interval < THAW_EVERY_MAX:
            interval *= 2
            assert refreeze.interval == interval
            assert collections_to_thaw() == interval
        assert refreeze.interval == THAW_EVERY_MAX
        refs = dead_frozen_cycles(THAW_PAYS)  # two nodes and their dicts each: it pays
        while not refreeze.thawing:
            gc.collect()
            assert all(r() is not None for r in refs[:10])
        gc.collect()
        assert all(r() is None for r in refs) and refreeze.last_freed >= THAW_PAYS
        assert refreeze.interval == THAW_EVERY
    finally:
        refreeze.stop()


def test_a_replaced_graph_is_freed_by_the_next_full_collection_though_it_was_frozen(
    unfrozen: None, tmp_path: Path, spark: Any
) -> None:
    """An install replaces the dataflow graph; what the old one held (cycles of nodes and
    their states) was frozen by an earlier full collection, and the scheduler's view state
    thaws it (`graph_dropped`) so that the next full collection frees it."""
    scheduler = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600, graph_dropped=REFREEZE.thaw)
    scheduler.start()
    try:
        scheduler.install(VOTES)
        epoch = scheduler.write([("article", [row(id=1, title="a")], [])])
        rows, _ = scheduler.lookup(VIEW, [row(id=1)], min_epoch=epoch)
        assert rows == [[{"id": 1, "title": "a", "votes": 0}]]
        program_graph = scheduler.view_state.graph
        assert program_graph is not None
        old = weakref.ref(program_graph.graph)  # the dataflow: nodes and their states, in cycles
        del program_graph
        REFREEZE.start()
        gc.collect()  # freezes the graph with everything else
        scheduler.install(VOTES)  # a new graph
        assert old() is not None  # in cycles: only a collection frees it
        gc.collect()
        assert old() is None, "the replaced graph outlived a full collection"
    finally:
        scheduler.stop()
