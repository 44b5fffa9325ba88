"""The logged writes that the Parquet store does not hold yet, and their overlay on a snapshot.

DESIGN §3, "at the sources": a keyed Spark job reads the store at version v;
adding the logged operations for the same keys in (v, applied] gives the source
exactly as the dataflow has seen it. Sources are sets with last writer wins per
tuple, so replaying the operations in epoch order over the snapshot is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Iterator, Sequence

import numpy as np

from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.server.types import LoggedBatch, SourceChange, Tuple_, Value
from pomoview.server.views.tail_runs import Run, appended, operations

# The int64 range: an int key outside it is in no batch whose keys are an int64 array.
_INT64 = (-(1 << 63), (1 << 63) - 1)


class _BatchIndex:
    """One batch's operations on one source, found by their columns at some positions: for
    one int column (a vote's article), the keys as a sorted int64 array and each key's rows
    a slice of it (one numpy sort per batch, a binary search per fetch); otherwise a dict
    of key -> its operations. Either way a key's operations keep their order (a batch's
    inserts before its deletes), as `_operations` replays them."""

    __slots__ = ("ops", "sorted_keys", "order", "by_key")

    def __init__(self, change: SourceChange, positions: tuple[int, ...]) -> None:
        # A tuple, not a list: the collector stops tracking a tuple of untracked tuples of
        # atoms once it has looked at it, where a list stays tracked for life. The tail's
        # indexes held 1.7 million operations in lists near a busy phase's end (scale 0.1),
        # which every full collection walked; as tuples, a full collection's CPU went from
        # 66-111 ms to 43-73 ms (one run each).
        self.ops: tuple[tuple[Tuple_, int], ...] = operations(change)
        self.by_key: dict[Key, list[tuple[Tuple_, int]]] | None = None
        self.sorted_keys: np.ndarray | None = None
        self.order: np.ndarray | None = None
        if len(positions) == 1:
            (p,) = positions
            keys = np.array([t[p] for t, _ in self.ops])
            if keys.dtype == np.int64:  # strings, floats, ints past int64: the dict below
                self.order = np.argsort(keys, kind="stable")
                self.sorted_keys = keys[self.order]
                return
        self.by_key = {}
        for t, op in self.ops:
            self.by_key.setdefault(tuple(t[i] for i in positions), []).append((t, op))

    def operations(self, keys: Collection[Key], int_keys: np.ndarray | None) -> Iterator[tuple[Tuple_, int]]:
        if self.by_key is not None:
            for key in keys:
                yield from self.by_key.get(key, ())
            return
        assert self.sorted_keys is not None and self.order is not None
        if int_keys is None or not len(int_keys):
            return
        lo = np.searchsorted(self.sorted_keys, int_keys, side="left")
        hi = np.searchsorted(self.sorted_keys, int_keys, side="right")
        ops, order = self.ops, self.order
        for start, stop in zip(lo.tolist(), hi.tolist(), strict=True):
            for i in order[start:stop].tolist():
                yield ops[i]


class LogTail:
    """Batches logged after the store's version, oldest first. Not thread-safe: the caller
    holds the dataflow lock, except around `prepare`.

    `base` is the epoch the tail starts after: a snapshot at version v can be
    advanced with this tail exactly when v >= base.

    The overlay of a keyed fetch reads only its keys' operations, through an index per
    batch, source and key positions (`_BatchIndex`), built at the first fetch that needs
    it and dropped with its batch. A scan of the whole tail per fetch, on the dataflow
    lock, cost 40-65 ms a fetch in the mixed-load test while the first flush had not
    landed yet (750 batches, 49,000 votes); an index of the whole tail kept up to date at
    every append cost the apply a fifth of its time under a write load (py-spy --gil,
    bench/hits_under_load.py at full scale): a write pays nothing now, a fetch a binary
    search per batch. A lookup builds the indexes its Spark answers need before it takes
    the dataflow lock (`prepare`): built in its round, under the lock, they were most of a
    cold miss's hold of it under a write load (py-spy, bench/hits_under_load.py), and the
    apply waited that long. For one int key column, `prepare` builds runs instead, each over
    many batches (tail_runs.py): the binary searches per batch were then most of the hold.
    """

    def __init__(self, base: int, batches: Iterable[LoggedBatch] = ()) -> None:
        self.base = base
        self.batches: list[LoggedBatch] = [b for b in batches if b.epoch > base]
        # (epoch, source, positions) -> that batch's index; removed with the batch.
        self._indexes: dict[tuple[int, str, tuple[int, ...]], _BatchIndex] = {}
        # (source, position) -> the runs of its batches by one int column (tail_runs.py), in
        # epoch order: replaced whole, so a fetch reads one version without a lock.
        self._runs: dict[tuple[str, int], tuple[Run, ...]] = {}
        # Guards `_indexes`, `_runs` and `base` against `prepare`, which runs without the
        # dataflow lock. Invariant: no index is held for a batch at or below `base`, nor a run
        # whose batches all are, once `trim_through` returned (prepare checks `base` under
        # this lock before it adds one).
        self._index_lock = threading.Lock()
        self._build_lock = threading.Lock()  # one `prepare` builds runs at a time

    def append(self, batch: LoggedBatch) -> None:
        assert not self.batches or batch.epoch > self.batches[-1].epoch
        self.batches.append(batch)

    def flushable(self, through: int) -> list[LoggedBatch]:
        return [b for b in self.batches if b.epoch <= through]

    def trim_through(self, epoch: int) -> list[list[object]]:
        """Forgets batches at or below `epoch` (they are durable in Parquet now) and their
        indexes. Returns what it let go of, for the caller to free outside its lock with
        `free_in_slices`."""
        kept = [b for b in self.batches if b.epoch > epoch]
        trimmed: list[object] = list(self.batches[: len(self.batches) - len(kept)])
        self.batches = kept
        with self._index_lock:
            self.base = max(self.base, epoch)
            going = [k for k in self._indexes if k[0] <= epoch]
            dropped: list[object] = [self._indexes.pop(k) for k in going]
            for at, runs in self._runs.items():
                dropped += [r for r in runs if r.last <= epoch]
                self._runs[at] = tuple(r for r in runs if r.last > epoch)
        return [trimmed, dropped]

    def prepare(self, source: str, positions: Sequence[int], after: int) -> int:
        """Builds the indexes that `key_operations(source, positions, ..., after, ...)` will
        read, for the batches the tail holds now; the only method called without the
        dataflow lock. Returns how many batches it indexed. Batches appended later are
        indexed by the fetch itself, under the lock, as before."""
        at_positions = tuple(positions)
        if len(at_positions) == 1:
            covered = self._prepare_runs(source, at_positions[0])
            if covered is not None:
                return covered
        built = 0
        for batch in list(self.batches):  # a copy: the apply appends, the flusher trims
            at = (batch.epoch, source, at_positions)
            change = batch.changes.get(source)
            if batch.epoch <= after or change is None or at in self._indexes:
                continue
            index = _BatchIndex(change, at_positions)
            with self._index_lock:
                if batch.epoch > self.base:  # else trimmed meanwhile: it would never be dropped
                    self._indexes.setdefault(at, index)
                    built += 1
        return built

    def _prepare_runs(self, source: str, position: int) -> int | None:
        """A run of the batches after the last run of (`source`, `position`), merged as
        tail_runs.py says; how many batches it covers, or None when their keys are not all
        64-bit ints (then `prepare` indexes them per batch)."""
        with self._build_lock:
            at = (source, position)
            runs = self._runs.get(at, ())
            since = max(runs[-1].last if runs else 0, self.base)
            batches = [b for b in list(self.batches) if b.epoch > since]  # a copy, as above
            if not batches:
                return 0
            run = Run.of(batches, source, position)
            if run is None:
                return None
            merged = appended(runs, run)
            with self._index_lock:
                self._runs[at] = tuple(r for r in merged if r.last > self.base)
            return len(batches)

    def indexes(self) -> int:
        """How many batch indexes and runs are held (each dropped with its batches)."""
        return len(self._indexes) + sum(len(runs) for runs in self._runs.values())

    def _index(self, batch: LoggedBatch, source: str, positions: tuple[int, ...]) -> _BatchIndex | None:
        change = batch.changes.get(source)
        if change is None:
            return None
        at = (batch.epoch, source, positions)
        index = self._indexes.get(at)
        if index is None:
            built = _BatchIndex(change, positions)
            with self._index_lock:
                index = self._indexes.setdefault(at, built)
        return index

    def key_operations(
        self,
        source: str,
        positions: Sequence[int],
        keys: Collection[Key],
        after: int,
        through: int,
    ) -> Iterator[tuple[Tuple_, int]]:
        """The logged operations on `source` in epochs (after, through] whose columns at
        `positions` are one of `keys`: (tuple, +1) for an insert, (tuple, -1) for a delete,
        each key's in log order (a batch's inserts before its deletes)."""
        assert after >= self.base, "the tail no longer holds the writes after the snapshot"
        wanted = set(keys)
        ints = [k[0] for k in wanted if len(k) == 1 and type(k[0]) is int and _INT64[0] <= k[0] <= _INT64[1]]
        int_keys = np.unique(np.array(ints, dtype=np.int64)) if len(positions) == 1 else None
        covered = after  # the batches through this epoch are read (or not wanted)
        if int_keys is not None:
            for run in self._runs.get((source, positions[0]), ()):
                if run.last <= covered:
                    continue
                if run.first > through:
                    break
                if len(int_keys):
                    yield from run.operations(int_keys, after, through)
                covered = run.last
        for batch in self.batches:
            if batch.epoch <= covered:
                continue
            if batch.epoch > through:
                break
            index = self._index(batch, source, tuple(positions))
            if index is not None:
                yield from index.operations(wanted, int_keys)

    def overlay(
        self,
        source: str,
        snapshot: Iterable[Row],
        snapshot_version: int,
        through: int,
        positions: Sequence[int],
        keys: Collection[Key],
        filters: Sequence[tuple[int, Value]] = (),
    ) -> set[Row]:
        """`snapshot` (the source at `snapshot_version`, restricted to `keys` and to the tuples
        whose column at each position of `filters` equals its value) advanced to `through`;
        the logged operations are restricted alike. It answers a dataflow fetch: the keys
        and the rows are the dataflow's (`Key`, `Row`), the logged tuples among them."""
        assert snapshot_version >= self.base, "the tail no longer holds the writes after the snapshot"
        present = set(snapshot)
        if positions:
            ops = self.key_operations(source, positions, keys, snapshot_version, through)
        else:
            ops = self._operations(source, snapshot_version, through)
        for t, op in ops:
            if all(t[i] == v for i, v in filters):
                if op > 0:
                    present.add(t)
                else:
                    present.discard(t)
        return present

    def _operations(self, source: str, after: int, through: int) -> Iterator[tuple[Tuple_, int]]:
        """Every logged operation on `source` in epochs (after, through], in log order (a
        batch's inserts before its deletes)."""
        for batch in self.batches:
            if batch.epoch <= after:
                continue
            if batch.epoch > through:
                break
            change: SourceChange | None = batch.changes.get(source)
            if change is not None:
                yield from ((t, 1) for t in change.inserts)
                yield from ((t, -1) for t in change.deletes)


def free_in_slices(garbage: list[list[object]]) -> None:
    """Frees lists of batches (or of their indexes) one element at a time. Freed whole, a
    flush's worth of logged rows held the GIL for its whole deallocation, one bytecode of
    tens of milliseconds that every hit waited behind; between elements (a batch's rows
    each) other threads get their turn."""
    for item in garbage:
        while item:
            item.pop()
    garbage.clear()
