"""What the server and its hit replica say to each other over their one socket (pickled by
`multiprocessing.connection`), in the order the server's dataflow lock saw it happen.

Server -> replica: `Views` (a new graph: forget everything, these are the views), then
`Changes` (the rows of every reader key that changed, or None for a key that went). The
replica applies them in order, so after each message its copy equals the server's readers
as published at that message's epoch. Replica -> server: `Reads`, the hits it answered and
the keys they read, for the server's eviction marks and counters.
"""

from __future__ import annotations

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
