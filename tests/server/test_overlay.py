"""The log tail's keyed overlay (server/log_tail.py) against a scan of every logged batch: random
batches of inserts and deletes, keyed fetches by one or two columns with and without a
constant filter, at snapshots in the tail, with batches appended after an index was built
and the tail trimmed between fetches."""

from __future__ import annotations

import gc
import random
import threading
from collections.abc import Callable, Iterable

import pytest

from pomoview.server.types import LoggedBatch, SourceChange, Tuple_
from pomoview.server.views import log_tail
from pomoview.server.views.log_tail import LogTail, free_in_slices


def _scan(
    batches: list[LoggedBatch],
    source: str,
    snapshot: set[Tuple_],
    after: int,
    through: int,
    positions: tuple[int, ...],
    keys: set[tuple[int, ...]],
    filters: list[tuple[int, int]],
) -> set:
    """The oracle: every operation of every batch in (after, through], in order."""
    present = {t for t in snapshot if tuple(t[i] for i in positions) in keys}
    present = {t for t in present if all(t[i] == v for i, v in filters)}
    for batch in batches:
        change = batch.changes.get(source)
        if not after < batch.epoch <= through or change is None:
            continue
        for side, insert in ((change.inserts, True), (change.deletes, False)):
            for t in side:
                if tuple(t[i] for i in positions) in keys and all(t[i] == v for i, v in filters):
                    (present.add if insert else present.discard)(t)
    return present


def _tuple(rng: random.Random, conv: Callable[[int], object] = int) -> Tuple_:
    return (conv(rng.randrange(8)), conv(rng.randrange(5)), conv(rng.randrange(3)))


@pytest.mark.parametrize("kind", ["ints", "strings"])
def test_keyed_overlay_equals_a_scan_of_the_tail(kind: str) -> None:
    """Keys of ints (a batch's index is a sorted array) and of strings (a dict); the
    indexes of trimmed batches go with them."""
    rng = random.Random(3)
    conv: Callable[[int], object] = int if kind == "ints" else (lambda v: f"s{v}")
    tail = LogTail(0)
    logged: list[LoggedBatch] = []
    for epoch in range(1, 400):
        changes = {}
        for source in ("vote", "other"):
            if rng.random() < 0.7:
                ins = {_tuple(rng, conv) for _ in range(rng.randrange(6))}
                dels = {_tuple(rng, conv) for _ in range(rng.randrange(4))} - ins
                changes[source] = SourceChange(tuple(ins), tuple(dels))
        batch = LoggedBatch(epoch, changes)
        tail.append(batch)
        logged.append(batch)
        if epoch % 50 == 0:
            tail.trim_through(epoch - 30)
            assert tail.indexes() <= 3 * len(tail.batches)  # one per batch and positions asked
        if epoch % 7:
            continue
        for _ in range(3):
            positions = rng.choice([(0,), (1,), (0, 2)])
            keys = {tuple(conv(rng.randrange(8 if p == 0 else 5 if p == 1 else 3)) for p in positions)
                    for _ in range(rng.randrange(1, 4))}
            filters = rng.choice([[], [(2, conv(rng.randrange(3)))]])
            after = rng.randrange(tail.base, epoch + 1)
            snapshot = {_tuple(rng, conv) for _ in range(10)}
            chosen = {t for t in snapshot if tuple(t[i] for i in positions) in keys
                      and all(t[i] == v for i, v in filters)}
            prepared = rng.random() < 0.5
            if prepared:  # a lookup's, before its round: the overlay then indexes nothing
                tail.prepare("vote", positions, after)
                held = tail.indexes()
            got = tail.overlay("vote", chosen, after, epoch, positions, keys, filters)
            if prepared:
                assert tail.indexes() == held, "the overlay indexed a batch prepare had indexed"
            expected = _scan(logged, "vote", chosen, after, epoch, positions, keys, filters)
            assert got == expected, (epoch, positions, keys, filters)


def test_a_trim_hands_back_what_it_dropped_and_it_is_freed_in_slices() -> None:
    batches = [LoggedBatch(e, {"vote": SourceChange(((e, 1), (e, 2)), ())}) for e in range(1, 11)]
    tail = LogTail(0, batches)
    assert set(tail.overlay("vote", [], 0, 10, (0,), [(3,)])) == {(3, 1), (3, 2)}  # indexes each batch
    assert tail.indexes() == 10
    garbage = tail.trim_through(8)
    trimmed, dropped = garbage
    assert trimmed == batches[:8] and [b.epoch for b in tail.batches] == [9, 10]
    assert isinstance(dropped, list) and len(dropped) == 8 and tail.indexes() == 2
    free_in_slices(garbage)
    assert garbage == [] and trimmed == [] and dropped == []
    assert set(tail.overlay("vote", [], 8, 10, (0,), [(9,)])) == {(9, 1), (9, 2)}


def test_prepare_racing_a_trim_keeps_no_index_of_a_trimmed_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """`prepare` runs without the dataflow lock: a flush may trim the batch it is indexing.
    A gate holds prepare inside the index of batch 1 while the tail is trimmed through 2;
    the index it then finishes is not kept (nothing would ever drop it), batch 3's is.
    String keys: indexed per batch (int keys take runs, the next test)."""
    batches = [LoggedBatch(e, {"vote": SourceChange(((f"s{e}", 1), (f"s{e}", 2)), ())}) for e in range(1, 4)]
    tail = LogTail(0, batches)
    inside, release = threading.Event(), threading.Event()
    real = log_tail._BatchIndex

    class Gated(real):  # type: ignore[misc, valid-type]
        def __init__(self, change: SourceChange, positions: tuple[int, ...]) -> None:
            if change.inserts[0][0] == "s1":
                inside.set()
                assert release.wait(10)
            super().__init__(change, positions)

    monkeypatch.setattr(log_tail, "_BatchIndex", Gated)
    built: list[int] = []
    worker = threading.Thread(target=lambda: built.append(tail.prepare("vote", (0,), 0)))
    worker.start()
    assert inside.wait(10)
    tail.trim_through(2)
    release.set()
    worker.join(10)
    assert built == [1]  # batch 3 only (batch 2 was trimmed before prepare reached it)
    assert tail.indexes() == 1
    assert set(tail.overlay("vote", [], 2, 3, (0,), [("s3",)])) == {("s3", 1), ("s3", 2)}
    assert tail.indexes() == 1  # the overlay found batch 3's index ready


def test_prepare_racing_a_trim_keeps_no_run_of_trimmed_batches_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same race for a run (int keys): a gate holds prepare inside the run of batches 1
    and 2 while the tail is trimmed through 2; the run is not kept. A run that reaches past
    the trim is kept, and a fetch after the trim reads only its later operations."""
    batches = [LoggedBatch(e, {"vote": SourceChange(((e, 1), (e % 2, 2)), ())}) for e in range(1, 3)]
    tail = LogTail(0, batches)
    inside, release = threading.Event(), threading.Event()
    real = log_tail.Run

    class Gated(real):  # type: ignore[misc, valid-type]
        @classmethod
        def of(cls, batches: list[LoggedBatch], source: str, position: int) -> log_tail.Run | None:
            if batches[0].epoch == 1:
                inside.set()
                assert release.wait(10)
            return real.of(batches, source, position)

    monkeypatch.setattr(log_tail, "Run", Gated)
    worker = threading.Thread(target=lambda: tail.prepare("vote", (0,), 0))
    worker.start()
    assert inside.wait(10)
    tail.trim_through(2)
    release.set()
    worker.join(10)
    assert tail.indexes() == 0
    for e in (3, 4):
        tail.append(LoggedBatch(e, {"vote": SourceChange(((e, 1), (e % 2, 2)), ())}))
    assert tail.prepare("vote", (0,), 2) == 2 and tail.indexes() == 1
    tail.trim_through(3)  # the run of 3 and 4 reaches past it: kept
    assert tail.indexes() == 1
    assert sorted(tail.key_operations("vote", (0,), [(4,), (0,), (3,)], 3, 4)) == [((0, 2), 1), ((4, 1), 1)]


def per_key(operations: Iterable[tuple[Tuple_, int]]) -> dict[object, list[tuple[Tuple_, int]]]:
    """Operations grouped by their first column, each group in the order given."""
    out: dict[object, list[tuple[Tuple_, int]]] = {}
    for t, op in operations:
        out.setdefault(t[0], []).append((t, op))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_runs_answer_as_the_batches_do_and_stay_few(seed: int) -> None:
    """A tail prepared after every append (runs merged over and over) gives each keyed
    fetch the operations a tail indexed per batch gives, in the same order per key, for
    windows ending before its last batch too; the runs stay logarithmic in the operations."""
    rng = random.Random(seed)
    runs, batches = LogTail(0), LogTail(0)
    for epoch in range(1, 300):
        ins = tuple({(rng.randrange(12), rng.randrange(50)) for _ in range(rng.randrange(8))})
        dels = tuple({(rng.randrange(12), rng.randrange(50)) for _ in range(rng.randrange(3))} - set(ins))
        changes = {"vote": SourceChange(ins, dels)} if ins or dels or rng.random() < 0.5 else {}
        for tail in (runs, batches):
            tail.append(LoggedBatch(epoch, changes))
        runs.prepare("vote", (0,), 0)
        ops = sum(len(b.changes["vote"].inserts) + len(b.changes["vote"].deletes)
                  for b in runs.batches if "vote" in b.changes)
        assert runs.indexes() <= ops.bit_length() + 2, (runs.indexes(), ops)
        if epoch % 60 == 0:
            for tail in (runs, batches):
                tail.trim_through(epoch - 40)
        if epoch % 5:
            continue
        keys = [(rng.randrange(13),) for _ in range(rng.randrange(1, 4))]
        after = rng.randrange(runs.base, epoch + 1)
        through = rng.randrange(after, epoch + 1)

        got, expected = (
            per_key(t.key_operations("vote", (0,), keys, after, through)) for t in (runs, batches)
        )
        assert got == expected, (epoch, keys, after, through)


def test_the_tails_indexes_leave_no_large_container_for_the_collector_to_walk() -> None:
    """Every full collection walks each tracked container's items: the tail's indexes, one per
    logged batch of a busy write load, must not keep their operations in tracked containers
    (lists are tracked for life; a tuple of tuples of atoms is untracked once collected)."""
    rows = 2000
    batches = [
        LoggedBatch(e, {"vote": SourceChange(tuple((e * rows + i, i) for i in range(rows)), ())})
        for e in range(1, 6)
    ]
    tail = LogTail(0, batches)
    assert tail.prepare("vote", (0,), 0) == 5
    firsts = [((e * rows, 0), 1) for e in range(1, 6)]  # each index's first operation

    def holds_operations(o: object) -> bool:
        if type(o) not in (list, tuple) or len(o) < rows:  # type: ignore[arg-type]
            return False
        first = o[0]  # type: ignore[index]
        return type(first) is tuple and any(first == f for f in firsts)

    gc.collect()
    gc.collect()
    walked = [len(o) for o in gc.get_objects() if holds_operations(o)]
    assert walked == [], f"tracked containers of the tail's operations: {walked}"
    assert set(tail.overlay("vote", [], 0, 5, (0,), [(3 * rows + 7,)])) == {(3 * rows + 7, 7)}
