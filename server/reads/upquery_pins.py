"""The store snapshots running upqueries have pinned, which the log tail must outlive."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType

from pomoview.server.store.source_store import Pin, SourceStore


class UpqueryPins:
    """Pins of the store for upquery jobs, with how many pins each version has.

    An upquery's answer at store version v is advanced to the applied epoch with the log
    tail's batches after v, so the flusher must not trim the tail past v while any lookup
    may still read that answer (`UpqueryJobs` holds the pin until the last such lookup
    ends). The flusher reads the pinned versions through `held` to bound its trim.

    Guarded by the dataflow lock (`lock`), which the flusher trims the tail under: a pin
    and its version are registered before the trim reads them, or after it is done.
    """

    def __init__(self, store: SourceStore, lock: threading.Condition) -> None:
        self._store = store
        self._lock = lock
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

    def held(self) -> Mapping[int, int]:
        """The pinned versions (caller holds the dataflow lock)."""
        return MappingProxyType(self._versions)
