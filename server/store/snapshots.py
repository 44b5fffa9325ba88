"""The store's snapshots while it runs: the current one (replaced by publishing a new
manifest), the ones readers have pinned, and the parts no manifest lists any more, deleted
once no pinned snapshot lists them either."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator

from pomoview.server.store.fs import StoreFS
from pomoview.server.store.layout import Pin, Snapshot, part_folder
from pomoview.server.store.manifest import Manifest, StoreWriteError

log = logging.getLogger("pomoview.store")


class Snapshots:
    """`current` starts as `initial`, the snapshot `manifest` listed at open; the parts it
    retires are deleted from `fs`."""

    def __init__(self, initial: Snapshot, manifest: Manifest, fs: StoreFS) -> None:
        self._manifest = manifest
        self._fs = fs
        self._lock = threading.Lock()  # guards _current, _pins, _retired
        self._current = initial
        self._pins: dict[Pin, None] = {}
        self._retired: set[tuple[str, str]] = set()  # (source, part) unlisted, maybe pinned

    def current(self) -> Snapshot:
        with self._lock:
            return self._current

    def publish(self, snapshot: Snapshot) -> None:
        """Replace the manifest atomically and durably, then make `snapshot` the current one."""
        self._manifest.write(snapshot)
        with self._lock:
            self._current = snapshot

    def publish_written(self, snapshot: Snapshot, what: str) -> None:
        """`publish` for a write's new parts. A failure is `StoreWriteError`, and the parts
        stay: the new manifest may be on disk although the call failed (its folder's fsync,
        say); if it is not, they are unlisted, and the next open deletes them."""
        try:
            self.publish(snapshot)
        except OSError as err:
            raise StoreWriteError(f"{what} (its manifest)", self._fs.describe(), err) from err

    # --- pins -----------------------------------------------------------------------------------

    def pin(self) -> Pin:
        with self._lock:
            pin = Pin(self._current)
            self._pins[pin] = None
            return pin

    def unpin(self, pin: Pin) -> None:
        with self._lock:
            if pin not in self._pins:
                raise ValueError("this snapshot is not pinned")
            del self._pins[pin]
        self.collect_garbage()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[Pin]:
        pin = self.pin()
        try:
            yield pin
        finally:
            self.unpin(pin)

    def pinned_snapshot(self, pin: Pin) -> Snapshot:
        """The snapshot of `pin`; ValueError if it is not pinned (any more)."""
        with self._lock:
            if pin not in self._pins:
                raise ValueError("fetch at a snapshot that is not pinned")
        return pin.snapshot

    def pin_count(self) -> int:
        with self._lock:
            return len(self._pins)

    # --- retired parts ----------------------------------------------------------------------------

    def retire(self, source: str, parts: Iterable[str]) -> None:
        """Mark `parts` of `source`, which the current snapshot no longer lists, for deletion
        once no pinned snapshot lists them (`collect_garbage`)."""
        with self._lock:
            self._retired.update((source, name) for name in parts)

    def collect_garbage(self) -> None:
        """Delete the retired parts no snapshot lists any more."""
        with self._lock:
            if not self._retired:
                return
            live = {
                (name, part.name)
                for snapshot in (self._current, *(p.snapshot for p in self._pins))
                for name, state in snapshot.sources.items()
                for part in state.parts
            }
            dead = self._retired - live
            self._retired -= dead
        for source, name in sorted(dead):
            try:
                self._fs.delete_tree(part_folder(self._fs, source, name))
            except Exception:  # noqa: BLE001 (unlisted: the next open deletes it)
                log.warning("could not delete the replaced part %s/%s", source, name, exc_info=True)
