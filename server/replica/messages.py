"""What the server and its hit replica say to each other over their one socket (pickled by
`multiprocessing.connection`), in the order the server's dataflow lock saw it happen.

Server -> replica: `Views` (a new graph: forget everything, these are the views), then
`Changes` (the rows of every reader key that changed, or None for a key that went). The
replica applies them in order, so after each message its copy equals the server's readers
as published at that message's epoch. Replica -> server: `Reads`, the hits it answered and
the keys they read, for the server's eviction marks and counters.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pomoview.planner.frontend.validate import Relation

# A reader's name in the graph: (view, its key attributes in declared order).
ReaderName = tuple[str, tuple[str, ...]]
Key = tuple[object, ...]
Row = tuple[object, ...]


@dataclass(frozen=True)
class Views:
    """A new graph (an install, a bulk load, a reset): the replica drops every reader's
    copy. `relations` are the views' relations, without their rules."""

    relations: dict[str, Relation]
    epoch: int


@dataclass(frozen=True)
class Changes:
    """The readers' keys that changed since the last message, as of `epoch`: each key's
    rows in the view's order, or None when the key went missing."""

    epoch: int
    readers: list[tuple[ReaderName, dict[Key, list[Row] | None]]]


@dataclass(frozen=True)
class Reads:
    """The lookups the replica answered itself since its last report, and the keys they
    read per reader."""

    hits: int
    keys: list[tuple[ReaderName, list[Key]]]


class Outbox:
    """What the feed has yet to send, kept merged: the last `Views` and, after it, one
    entry per reader and changed key (a later change replaces an earlier one) at the last
    epoch. Applied in order, what `take` gives leaves a replica's copy as every message
    put would; and a replica that falls behind costs the server one entry per changed key,
    not one message per step."""

    def __init__(self) -> None:
        self._moved = threading.Condition()
        self._views: Views | None = None
        self._changes: dict[ReaderName, dict[Key, list[Row] | None]] = {}
        self._epoch: int | None = None  # of the last message put and not yet taken
        self._closed = False
        self._put = self._taken = self._sent = 0  # counts of messages

    def put(self, message: Views | Changes) -> None:
        with self._moved:
            if isinstance(message, Views):
                self._views, self._changes = message, {}
            else:
                for name, keys in message.readers:
                    self._changes.setdefault(name, {}).update(keys)
            self._epoch = message.epoch
            self._put += 1
            self._moved.notify_all()

    def take(self) -> list[Views | Changes] | None:
        """Everything put since the last take, merged (waits for some); None once closed."""
        with self._moved:
            self._moved.wait_for(lambda: self._epoch is not None or self._closed)
            if self._epoch is None:
                return None
            out: list[Views | Changes] = [] if self._views is None else [self._views]
            if self._changes or self._views is None or self._views.epoch != self._epoch:
                out.append(Changes(self._epoch, list(self._changes.items())))
            self._views, self._changes, self._epoch = None, {}, None
            self._taken = self._put
            return out

    def sent(self) -> None:
        """What the last `take` gave is sent."""
        with self._moved:
            self._sent = self._taken
            self._moved.notify_all()

    def wait_sent(self) -> None:
        """Returns once everything put so far is sent (tests)."""
        with self._moved:
            self._moved.wait_for(lambda: self._sent == self._put or self._closed)

    def close(self) -> None:
        with self._moved:
            self._closed = True
            self._moved.notify_all()
