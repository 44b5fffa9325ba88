"""The logged writes that the Parquet store does not hold yet, and their overlay on a snapshot.

DESIGN §3, "at the sources": a keyed Spark job reads the store at version v;
adding the logged operations for the same keys in (v, applied] gives the source
exactly as the dataflow has seen it. Sources are sets with last writer wins per
tuple, so replaying the operations in epoch order over the snapshot is exact.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence

from .types import LoggedBatch, SourceChange, Tuple_, Value


class LogTail:
    """Batches logged after the store's version, oldest first. Not thread-safe: the caller locks.

    `base` is the epoch the tail starts after: a snapshot at version v can be
    advanced with this tail exactly when v >= base.
    """

    def __init__(self, base: int, batches: Iterable[LoggedBatch] = ()) -> None:
        self.base = base
        self.batches: list[LoggedBatch] = [b for b in batches if b.epoch > base]

    def append(self, batch: LoggedBatch) -> None:
        assert not self.batches or batch.epoch > self.batches[-1].epoch
        self.batches.append(batch)

    def flushable(self, through: int) -> list[LoggedBatch]:
        return [b for b in self.batches if b.epoch <= through]

    def trim_through(self, epoch: int) -> None:
        """Forgets batches at or below `epoch` (they are durable in Parquet now)."""
        self.batches = [b for b in self.batches if b.epoch > epoch]
        self.base = max(self.base, epoch)

    def operations(self, source: str, after: int, through: int) -> Iterator[tuple[Tuple_, int]]:
        """The logged operations on `source` in epochs (after, through], in order: (tuple,
        +1) for an insert, (tuple, -1) for a delete (a batch's inserts before its deletes)."""
        assert after >= self.base, "the tail no longer holds the writes after the snapshot"
        for batch in self.batches:
            if batch.epoch <= after:
                continue
            if batch.epoch > through:
                break
            change: SourceChange | None = batch.changes.get(source)
            if change is None:
                continue
            for t in change.inserts:
                yield t, 1
            for t in change.deletes:
                yield t, -1

    def overlay(
        self,
        source: str,
        snapshot: Iterable[Tuple_],
        snapshot_version: int,
        through: int,
        positions: Sequence[int],
        keys: Collection[tuple[Value, ...]],
        filters: Sequence[tuple[int, Value]] = (),
    ) -> set[Tuple_]:
        """`snapshot` (the source at `snapshot_version`, restricted to `keys` and to the tuples
        whose column at each position of `filters` equals its value) advanced to `through`;
        the logged operations are restricted alike."""
        assert snapshot_version >= self.base, "the tail no longer holds the writes after the snapshot"
        present = set(snapshot)
        wanted = set(keys)

        def selected(t: Tuple_) -> bool:
            return (not positions or tuple(t[i] for i in positions) in wanted) and all(
                t[i] == v for i, v in filters
            )

        for batch in self.batches:
            if batch.epoch <= snapshot_version:
                continue
            if batch.epoch > through:
                break
            change: SourceChange | None = batch.changes.get(source)
            if change is None:
                continue
            for t in change.inserts:
                if selected(t):
                    present.add(t)
            for t in change.deletes:
                if selected(t):
                    present.discard(t)
        return present
