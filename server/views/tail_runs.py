"""Runs: the log tail's operations on one source, found by one int column, over many batches
at once (log_tail.py's index for keyed fetches under a write load).

Why: a keyed fetch reads its keys' logged operations since its snapshot. Indexed per batch,
that is two binary searches per batch logged since the last flush: 7-11 ms of CPU for one
key over 700 batches of 1,000 votes (in process), and 30-110 ms of the dataflow lock in
bench/hits_under_load.py's busy phase at full scale, where every cold miss's answering round
held the lock that long and the apply waited. A run holds the operations of consecutive
batches sorted by key once, so a fetch searches each run, not each batch.

Runs are built without the dataflow lock (`LogTail.prepare`, before a lookup's round) and
kept like a log-structured merge tree: a new run is joined with the runs before it while
they hold at most twice as many operations as what is being joined (`appended`), so the
runs' sizes fall geometrically and a tail of n operations has O(log n) runs.

Invariants (LogTail keeps them):
- a run's batches are consecutive batches of the tail (every batch the tail held between
  its first and last epoch), and runs are in epoch order without overlap;
- within a run, a key's operations are in log order (the batches in epoch order, each
  batch's inserts before its deletes): the sort by key is stable.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from pomoview.server.types import LoggedBatch, SourceChange, Tuple_

Operation = tuple[Tuple_, int]


def operations(change: SourceChange) -> tuple[Operation, ...]:
    """A batch's operations on one source in log order: its inserts (+1), then its deletes
    (-1). A tuple, not a list: the collector stops tracking a tuple of untracked tuples of
    atoms once it has looked at it, where a list stays tracked for life."""
    return (*((t, 1) for t in change.inserts), *((t, -1) for t in change.deletes))


class Run:
    __slots__ = ("first", "last", "ops", "epochs", "sorted_keys", "order")

    def __init__(
        self, first: int, last: int, ops: tuple[Operation, ...], epochs: np.ndarray, keys: np.ndarray
    ) -> None:
        self.first, self.last = first, last  # the epochs of its first and last batch
        # A tuple: untracked by the collector once looked at (see log_tail._BatchIndex).
        self.ops = ops
        self.epochs = epochs  # each operation's epoch, in `ops` order
        self.order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.order]

    @classmethod
    def of(cls, batches: Sequence[LoggedBatch], source: str, position: int) -> Run | None:
        """The run of `batches` (consecutive, in epoch order) on `source` by the column at
        `position`; None when a key is not a 64-bit int (log_tail indexes per batch then)."""
        per_batch = [operations(c) if (c := b.changes.get(source)) else () for b in batches]
        ops = tuple(itertools.chain.from_iterable(per_batch))
        column = [t[position] for t, _ in ops]
        keys = np.array(column, dtype=None if column else np.int64)
        # A bool would pass as 0 or 1 (an int64 array of them is exact, but not their type).
        if keys.dtype != np.int64 or bool in set(map(type, column)):
            return None
        counts = [len(o) for o in per_batch]
        epochs = np.repeat(np.array([b.epoch for b in batches], dtype=np.int64), counts)
        return cls(batches[0].epoch, batches[-1].epoch, ops, epochs, keys)

    def __len__(self) -> int:
        return len(self.ops)

    def keys(self) -> np.ndarray:
        """Each operation's key, in `ops` order."""
        keys = np.empty(len(self), dtype=np.int64)
        keys[self.order] = self.sorted_keys
        return keys

    @classmethod
    def joined(cls, runs: Sequence[Run]) -> Run:
        """Consecutive `runs` (in epoch order) as one run: one stable sort of them all."""
        if len(runs) == 1:
            return runs[0]
        return cls(
            runs[0].first,
            runs[-1].last,
            tuple(itertools.chain.from_iterable(run.ops for run in runs)),
            np.concatenate([run.epochs for run in runs]),
            np.concatenate([run.keys() for run in runs]),
        )

    def operations(self, int_keys: np.ndarray, after: int, through: int) -> Iterator[Operation]:
        """The operations in epochs (after, through] whose key is one of `int_keys` (sorted,
        distinct), each key's in log order."""
        lo = np.searchsorted(self.sorted_keys, int_keys, side="left")
        hi = np.searchsorted(self.sorted_keys, int_keys, side="right")
        spans = [(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True) if a < b]
        if not spans:
            return
        at = np.concatenate([self.order[a:b] for a, b in spans])
        if after >= self.first or through < self.last:
            epochs = self.epochs[at]
            at = at[(epochs > after) & (epochs <= through)]
        ops = self.ops
        for i in at.tolist():
            yield ops[i]


def appended(runs: tuple[Run, ...], run: Run) -> tuple[Run, ...]:
    """`runs` with `run` (of the batches after theirs) added: joined with the runs before it
    that hold at most twice as many operations as what is being joined, in one sort. So each
    run holds more than twice as many as the next, and n operations make at most about
    log2(n) + 2 runs (the last may be empty)."""
    out, joining, size = list(runs), [run], len(run)
    while out and len(out[-1]) <= 2 * size:
        joining.insert(0, out.pop())
        size += len(joining[0])
    out.append(Run.joined(joining))
    return tuple(out)
