"""The log tail's keyed overlay (server/log_tail.py) against a scan of every logged batch: random
batches of inserts and deletes, keyed fetches by one or two columns with and without a
constant filter, at snapshots in the tail, with batches appended after an index was built
and the tail trimmed between fetches."""

from __future__ import annotations

import random

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


def _tuple(rng: random.Random) -> Tuple_:
    return (rng.randrange(8), rng.randrange(5), rng.randrange(3))


@pytest.mark.parametrize("slack", [0, 10_000])
def test_keyed_overlay_equals_a_scan_of_the_tail(slack: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the trimmed batches' index entries dropped at every trim (slack 0) and kept
    across trims (the default slack): the same answers, and the indexes stay bounded."""
    monkeypatch.setattr(LogTail, "STALE_SLACK", slack)
    rng = random.Random(3)
    tail = LogTail(0)
    logged: list[LoggedBatch] = []
    for epoch in range(1, 400):
        changes = {}
        for source in ("vote", "other"):
            if rng.random() < 0.7:
                ins = {_tuple(rng) for _ in range(rng.randrange(6))}
                dels = {_tuple(rng) for _ in range(rng.randrange(4))} - ins
                changes[source] = SourceChange(tuple(ins), tuple(dels))
        batch = LoggedBatch(epoch, changes)
        tail.append(batch)
        logged.append(batch)
        if epoch % 50 == 0:
            tail.trim_through(epoch - 30)
            live = sum(len(c.inserts) + len(c.deletes) for b in tail.batches for c in b.changes.values())
            assert tail.indexed_operations() <= 2 * live + slack
        if epoch % 7:
            continue
        for _ in range(3):
            positions = rng.choice([(0,), (1,), (0, 2)])
            keys = {tuple(rng.randrange(8 if p == 0 else 5 if p == 1 else 3) for p in positions)
                    for _ in range(rng.randrange(1, 4))}
            filters = rng.choice([[], [(2, rng.randrange(3))]])
            after = rng.randrange(tail.base, epoch + 1)
            snapshot = {_tuple(rng) for _ in range(10)}
            chosen = {t for t in snapshot if tuple(t[i] for i in positions) in keys
                      and all(t[i] == v for i, v in filters)}
            got = tail.overlay("vote", chosen, after, epoch, positions, keys, filters)
            expected = _scan(logged, "vote", chosen, after, epoch, positions, keys, filters)
            assert got == expected, (epoch, positions, keys, filters)


def test_a_trim_hands_back_what_it_dropped_and_it_is_freed_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LogTail, "STALE_SLACK", 0)
    batches = [LoggedBatch(e, {"vote": SourceChange(((e, 1), (e, 2)), ())}) for e in range(1, 11)]
    tail = LogTail(0, batches)
    assert set(tail.overlay("vote", [], 0, 10, (0,), [(3,)])) == {(3, 1), (3, 2)}  # builds an index
    garbage = tail.trim_through(8)
    trimmed, *indexes = garbage
    assert trimmed == batches[:8] and [b.epoch for b in tail.batches] == [9, 10]
    assert len(indexes) == 1 and tail.indexed_operations() == 0  # 20 indexed > 2 x 4 live rows
    index = indexes[0]
    assert isinstance(index, dict) and index
    monkeypatch.setattr(log_tail, "FREE_SLICE", 3)
    free_in_slices(garbage)
    assert garbage == [] and trimmed == [] and index == {}
    assert set(tail.overlay("vote", [], 8, 10, (0,), [(9,)])) == {(9, 1), (9, 2)}  # rebuilt
