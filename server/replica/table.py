"""The hit replica's copy of the server's readers: each present key's rows, as of one
epoch, with each key's wire form cached as the server caches it.

Invariants:
- After `apply(m)`, the copy holds exactly the keys the server's readers held at `m`'s epoch
  (of the readers it has sent), with their rows; between two messages it never mixes
  epochs, since `apply` and `hits` hold one lock (an answer reads one epoch whole).
- Reads are monotonic: no answer here is older than an answer already given, here or by
  the server through the replica (`seen`): a hit waits for the copy to reach that epoch,
  which the server sent before its own answer went out (server/replica/feed.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pomoview.planner.frontend.validate import Relation
from pomoview.server.replica.messages import Changes, Key, ReaderName, Reads, Row, Views

E = TypeVar("E")


class ReplicaTable:
    def __init__(self, catch_up: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._moved = threading.Condition(self._lock)  # notified at every `apply`
        self._catch_up = catch_up  # the longest a hit waits for the copy to reach an epoch
        self.epoch = 0
        self._seen = 0  # the newest epoch an answer through the replica has reflected
        self._acked = 0  # the newest epoch a write through the replica was acknowledged at
        # The views of the server's program (None: no program yet).
        self.relations: dict[str, Relation] | None = None
        self._rows: dict[ReaderName, dict[Key, list[Row]]] = {}
        # (reader, form) -> key -> its encoding, dropped when the key changes (`_update`).
        self._wire: dict[tuple[ReaderName, str], dict[Key, Any]] = {}
        self._reads: dict[ReaderName, set[Key]] = {}
        self._hits = 0

    def apply(self, message: Views | Changes) -> None:
        with self._lock:
            if isinstance(message, Views):
                self.relations = message.relations
                self._rows, self._wire, self._reads = {}, {}, {}
            else:
                for name, keys in message.readers:
                    self._update(name, keys)
            self.epoch = message.epoch
            self._moved.notify_all()

    def seen(self, epoch: int) -> None:
        """An answer at `epoch` went out through the replica (the server gave it)."""
        with self._lock:
            self._seen = max(self._seen, epoch)

    def _update(self, name: ReaderName, keys: dict[Key, list[Row] | None]) -> None:
        table = self._rows.setdefault(name, {})
        wires = [wire for (reader, _), wire in self._wire.items() if reader == name]
        for key, rows in keys.items():
            if rows is None:
                table.pop(key, None)
            else:
                table[key] = rows
            for wire in wires:
                wire.pop(key, None)

    def acked(self, epoch: int) -> None:
        """A write through the replica was acknowledged at `epoch`: the server applies it
        soon (its apply lag is bounded), so a lookup waiting for it may wait here."""
        with self._lock:
            self._acked = max(self._acked, epoch)

    def hits(
        self,
        name: ReaderName,
        keys: Sequence[Key],
        min_epoch: int | None,
        encode: Callable[[list[Row]], E],
        form: str,
    ) -> tuple[list[E], int] | None:
        """Each key's rows as `encode` puts them, and the epoch they are at; None when a key
        is missing here, or when the copy does not reach `min_epoch` (or an epoch already
        answered, see `seen`) within the catch-up time; the server answers those. It waits
        only for epochs it knows are coming: answered, or acknowledged to a write here."""
        with self._lock:
            # An epoch no write through here was acknowledged at: the server says what it is.
            if min_epoch is not None and min_epoch > max(self.epoch, self._acked):
                return None
            wanted = max(self._seen, min_epoch or 0)
            if wanted > self.epoch and not self._moved.wait_for(
                lambda: self.epoch >= wanted, timeout=self._catch_up
            ):
                return None
            table = self._rows.get(name)
            if table is None:
                return None
            wire = self._wire.setdefault((name, form), {})
            out: list[E] = []
            for key in keys:
                rows = table.get(key)
                if rows is None:
                    return None
                data = wire.get(key)
                if data is None:
                    data = wire[key] = encode(rows)
                out.append(data)
            self._reads.setdefault(name, set()).update(keys)
            self._hits += 1
            return out, self.epoch

    def take_reads(self) -> Reads | None:
        """The hits and read keys since the last call (None: none)."""
        with self._lock:
            if not self._hits:
                return None
            reads = Reads(self._hits, [(name, list(keys)) for name, keys in self._reads.items()])
            self._reads, self._hits = {}, 0
            return reads

    def keys(self, name: ReaderName) -> dict[Key, list[Row]]:
        """A copy of one reader's keys and rows (tests)."""
        with self._lock:
            return dict(self._rows.get(name, {}))
