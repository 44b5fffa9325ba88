"""The logged writes that the Parquet store does not hold yet, and their overlay on a snapshot.

DESIGN §3, "at the sources": a keyed Spark job reads the store at version v;
adding the logged operations for the same keys in (v, applied] gives the source
exactly as the dataflow has seen it. Sources are sets with last writer wins per
tuple, so replaying the operations in epoch order over the snapshot is exact.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence

from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.server.types import LoggedBatch, SourceChange, Tuple_, Value

# A key's logged operations: (epoch, tuple, +1 insert / -1 delete), in log order.
_Ops = list[tuple[int, Tuple_, int]]


class LogTail:
    """Batches logged after the store's version, oldest first. Not thread-safe: the caller locks.

    `base` is the epoch the tail starts after: a snapshot at version v can be
    advanced with this tail exactly when v >= base.

    The overlay of a keyed fetch reads only its keys' operations, through an index per
    (source, key positions) built at the first such fetch and kept up to date by `append`.
    A scan of the whole tail per fetch, on the dataflow lock, cost 40-65 ms a fetch in the
    mixed-load test while the first flush had not landed yet (750 batches, 49,000 votes),
    and every other lookup and write waited behind it.
    """

    # Stale index entries tolerated beyond twice the tail's rows (a class setting for tests).
    STALE_SLACK = 10_000

    def __init__(self, base: int, batches: Iterable[LoggedBatch] = ()) -> None:
        self.base = base
        self.batches: list[LoggedBatch] = [b for b in batches if b.epoch > base]
        self._indexes: dict[tuple[str, tuple[int, ...]], dict[Key, _Ops]] = {}
        # Operations the indexes hold, and the tail's rows: a trim leaves its batches'
        # entries in the indexes (reads skip them by epoch) until they outnumber the live.
        self._indexed = 0
        self._rows = sum(_rows(b) for b in self.batches)

    def append(self, batch: LoggedBatch) -> None:
        assert not self.batches or batch.epoch > self.batches[-1].epoch
        self.batches.append(batch)
        self._rows += _rows(batch)
        for (source, positions), index in self._indexes.items():
            change = batch.changes.get(source)
            if change is not None:
                self._indexed += _index_change(index, positions, batch.epoch, change)

    def flushable(self, through: int) -> list[LoggedBatch]:
        return [b for b in self.batches if b.epoch <= through]

    def trim_through(self, epoch: int) -> list[object]:
        """Forgets batches at or below `epoch` (they are durable in Parquet now). Returns
        what it let go of, for the caller to free outside its lock with `free_in_slices`.

        The indexes keep the trimmed batches' entries: `key_operations` reads only epochs
        after the store's version, so they are never read, and rebuilding the indexes at
        every flush cost the next cold fetch a pass over the whole tail under the dataflow
        lock. They are dropped (and rebuilt from what is left when next needed) once they
        hold more than twice the tail's rows, which bounds their memory."""
        kept = [b for b in self.batches if b.epoch > epoch]
        trimmed = self.batches[: len(self.batches) - len(kept)]
        self._rows -= sum(_rows(b) for b in trimmed)
        self.batches = kept
        self.base = max(self.base, epoch)
        garbage: list[object] = [trimmed]
        if self._indexed > 2 * self._rows + self.STALE_SLACK:
            garbage += self._indexes.values()
            self._indexes = {}
            self._indexed = 0
        return garbage

    def indexed_operations(self) -> int:
        """How many operations the indexes hold, trimmed ones included (their memory)."""
        return self._indexed

    def _index(self, source: str, positions: tuple[int, ...]) -> dict[Key, _Ops]:
        index = self._indexes.get((source, positions))
        if index is None:
            index = self._indexes[(source, positions)] = {}
            for batch in self.batches:
                change = batch.changes.get(source)
                if change is not None:
                    self._indexed += _index_change(index, positions, batch.epoch, change)
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
        index = self._index(source, tuple(positions))
        for key in set(keys):
            for epoch, t, op in index.get(key, ()):
                if after < epoch <= through:
                    yield t, op

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


def _index_change(
    index: dict[Key, _Ops], positions: tuple[int, ...], epoch: int, change: SourceChange
) -> int:
    """Indexes a batch's operations on one source; returns how many."""
    # A batch's inserts before its deletes, as `_operations` replays them.
    get = index.get
    for side, op in ((change.inserts, 1), (change.deletes, -1)):
        if len(positions) == 1:
            (p,) = positions
            keys: Iterable[Key] = [(t[p],) for t in side]
        else:
            keys = [tuple(t[i] for i in positions) for t in side]
        for key, t in zip(keys, side, strict=True):
            ops = get(key)
            if ops is None:
                index[key] = [(epoch, t, op)]
            else:
                ops.append((epoch, t, op))
    return len(change.inserts) + len(change.deletes)


def _rows(batch: LoggedBatch) -> int:
    return sum(len(c.inserts) + len(c.deletes) for c in batch.changes.values())


# Elements a slice of `free_in_slices` frees at once.
FREE_SLICE = 2000


def free_in_slices(garbage: list[object]) -> None:
    """Frees lists and dicts a slice at a time. Freed whole, a flush's worth of logged rows
    and index entries held the GIL for their whole deallocation, one bytecode of tens of
    milliseconds that every hit waited behind; between slices other threads get their turn."""
    for item in garbage:
        if isinstance(item, list):
            while item:
                del item[-FREE_SLICE:]
        elif isinstance(item, dict):
            while item:
                for _ in range(min(FREE_SLICE, len(item))):
                    item.popitem()
    garbage.clear()
