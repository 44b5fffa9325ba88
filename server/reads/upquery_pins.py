"""The store snapshots running upqueries have pinned, which the log tail must outlive."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from pomoview.server.store.source_store import Pin, SourceStore


class UpqueryPins:
    """Pins of the store for upquery jobs, with how many pins each version has.

    An upquery's answer at store version v is advanced to the applied epoch with the log
    tail's batches after v, so the flusher must not trim the tail past v while any lookup
    may still read that answer (`UpqueryJobs` holds the pin until the last such lookup
    ends). The flusher reads the pinned versions through `frozen` to bound its trim.

    These have their own lock, not the dataflow lock, so that a cold lookup takes the
    dataflow lock only for its rounds. Lock order: the dataflow lock, then this one (the
    flusher's trim holds both), then the store's own.

    Why a pin needs no dataflow lock: `pin` reads the store's version and registers it in
    one step under this lock, and the flusher publishes a new store version before it trims,
    then computes its bound (the lowest of the store's version and the pinned versions) and
    trims the tail while it holds this lock. A pin either registered before the trim read
    the pins, and is kept, or reads the store's version after the trim released them: a
    version at least the published one, which is at least the bound, so the tail still
    holds every batch after it.
    """

    def __init__(self, store: SourceStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._versions: Counter[int] = Counter()

    def pin(self) -> Pin:
        """Pins the store's current snapshot for an upquery job; the tail keeps the writes
        after it until `unpin`."""
        with self._lock:
            pin = self._store.pin()
            self._versions[pin.version] += 1
        return pin

    def unpin(self, pin: object) -> None:
        assert isinstance(pin, Pin)
        with self._lock:
            self._versions[pin.version] -= 1
            if not self._versions[pin.version]:
                del self._versions[pin.version]
        self._store.unpin(pin)

    @property
    def versions(self) -> dict[int, int]:
        """The pinned versions now, with how many pins each (a copy)."""
        with self._lock:
            return dict(self._versions)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[Mapping[int, int]]:
        """The pinned versions, which no pin or unpin changes until the block ends (take it
        after the dataflow lock, never before)."""
        with self._lock:
            yield MappingProxyType(self._versions)
