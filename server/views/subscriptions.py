"""Subscriptions (DESIGN §5, `Subscribe`): a view's rows for some keys, then their changes.

The seam between the snapshot and the changes: a subscription is attached to its reader
(`Reader.tap`) under the dataflow lock, in the same locked section that read the keys'
rows (after any upquery filled them, at the applied epoch E). Epochs are applied under that
lock too, so every change after E, and none at or before it, reaches the subscription:
nothing lost, nothing counted twice.

The dataflow thread never waits for a subscriber. While an epoch is applied the reader
hands each tapped key's changes to its subscriptions (`capture`: a dict update); once the
epoch is applied, `Subscriptions.seal` moves each changed subscription's net changes into
its buffer as one entry. A buffer holds at most `limit` rows (an epoch bigger than the
whole limit is still accepted into an empty buffer): a subscriber that falls further behind
is ended with RESOURCE_EXHAUSTED, its buffer dropped and its keys released at once.
The RPC thread takes entries from the buffer (`next`) and sends them.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.server.errors import ResourceExhausted, ServiceError, Unavailable

# Rows a subscription may hold unsent (`pomoview serve --subscription-buffer`).
DEFAULT_BUFFER_ROWS = 10_000
# Open subscriptions at once: each holds one of the server's RPC threads while it lasts.
MAX_SUBSCRIPTIONS = 64

Changes = list[tuple[Row, int]]


class Subscription:
    """One open subscription: its reader and keys, the changes of the epoch being applied,
    and the buffer of sealed epochs not yet sent."""

    def __init__(
        self,
        view: str,
        reader: Reader,
        keys: list[Key],
        limit: int,
        on_dirty: Callable[[Subscription], None],
    ) -> None:
        self.view = view
        self.reader = reader
        self.keys = keys
        self.limit = limit
        self._on_dirty = on_dirty
        # The current epoch's changes, row -> net weight (dataflow thread only).
        self._pending: dict[Row, int] = {}
        self._cond = threading.Condition(threading.Lock())
        self._buffer: deque[tuple[int, Changes]] = deque()
        self._rows = 0
        self._error: ServiceError | None = None
        self._closed = False
        self.attached = False
        # The view's (attribute, type) pairs, in the order of the reader's rows.
        self.attributes: list[tuple[str, str]] = []

    # -- the dataflow thread -------------------------------------------------------------

    def capture(self, changes: list[tuple[Row, int]]) -> None:
        pending = self._pending
        if not pending:
            self._on_dirty(self)
        for row, weight in changes:
            pending[row] = pending.get(row, 0) + weight

    def seal(self, epoch: int) -> bool:
        """Buffers the applied epoch's net changes; False when that overflowed the buffer
        (the subscription is then ended and must be detached)."""
        changes = [(row, w) for row, w in self._pending.items() if w]
        self._pending.clear()
        if not changes:
            return True
        with self._cond:
            if self._closed or self._error is not None:
                return False
            if self._buffer and self._rows + len(changes) > self.limit:
                self._buffer.clear()
                self._rows = 0
                self._error = ResourceExhausted(
                    f"the subscription to {self.view!r} fell behind: more than its buffer's "
                    f"limit of {self.limit} changed rows were waiting to be sent "
                    "(pomoview serve --subscription-buffer); subscribe again"
                )
                self._cond.notify_all()
                return False
            self._buffer.append((epoch, changes))
            self._rows += len(changes)
            self._cond.notify_all()
        return True

    def end(self, error: ServiceError) -> None:
        """Ends the subscription with `error`, after the entries already buffered."""
        with self._cond:
            if self._error is None:
                self._error = error
            self._cond.notify_all()

    # -- the RPC thread ------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> tuple[int, Changes] | None:
        """The next buffered epoch and its changes, waiting for one; None once closed, or
        after `timeout` s with nothing. Raises the error that ended the subscription once
        the buffer is empty."""
        with self._cond:
            while not self._buffer:
                if self._closed:
                    return None
                if self._error is not None:
                    raise self._error
                if not self._cond.wait(timeout):
                    return None
            epoch, changes = self._buffer.popleft()
            self._rows -= len(changes)
            return epoch, changes

    def close(self) -> None:
        """The stream ended (cancelled, or the client went away): wakes `next`."""
        with self._cond:
            self._closed = True
            self._buffer.clear()
            self._rows = 0
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Subscriptions:
    """The open subscriptions of a scheduler. Attaching, sealing and detaching happen under
    the dataflow lock; `on_change` reports the open count and overflows (for metrics)."""

    def __init__(
        self,
        limit: int = DEFAULT_BUFFER_ROWS,
        max_open: int = MAX_SUBSCRIPTIONS,
        on_overflow: Callable[[], None] = lambda: None,
    ) -> None:
        self.limit = limit
        self.max_open = max_open
        self.open: list[Subscription] = []
        self._dirty: list[Subscription] = []
        self.overflows = 0
        self._on_overflow = on_overflow

    def attach(self, view: str, reader: Reader, keys: list[Key]) -> Subscription:
        """A new subscription to `keys` of `reader` (all present); caller holds the lock."""
        if len(self.open) >= self.max_open:
            raise ResourceExhausted(
                f"too many open subscriptions (the server's limit is {self.max_open}); "
                "close one first"
            )
        sub = Subscription(view, reader, keys, self.limit, self._dirty.append)
        reader.tap(keys, sub)
        sub.attached = True
        self.open.append(sub)
        return sub

    def detach(self, sub: Subscription) -> None:
        """Releases the subscription's keys (idempotent); caller holds the lock."""
        if not sub.attached:
            return
        sub.attached = False
        sub.reader.untap(sub.keys, sub)
        self.open.remove(sub)

    def seal(self, epoch: int) -> None:
        """After `epoch` is applied: buffers each changed subscription's changes; detaches
        the ones that overflowed or were closed. Caller holds the lock."""
        if not self._dirty:
            return
        dirty = list(self._dirty)
        self._dirty.clear()  # in place: each subscription holds its bound `append`
        for sub in dirty:
            if not sub.seal(epoch) and sub.attached:
                if not sub.closed:
                    self.overflows += 1
                    self._on_overflow()
                self.detach(sub)

    def reset(self, reason: str) -> None:
        """The graph was replaced: every subscription ends (its reader is gone)."""
        self._dirty.clear()
        for sub in list(self.open):
            sub.end(Unavailable(f"the subscription to {sub.view!r} ended: {reason}; subscribe again"))
            sub.attached = False  # the reader goes with the old graph: nothing to untap
        self.open.clear()
