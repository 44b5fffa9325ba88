"""Reader: the state a view's lookups are answered from, keyed by the lookup columns.

Contract:
- Input: the view's set delta. Output: none (a sink).
- State: the view's rows, indexed by the key columns.
- Partial mode: deltas for missing keys are dropped; a lookup that misses
  upqueries the input for the missing keys and keeps the answer.
- Full mode (no key columns, or no key provenance): hydrated at build time.
- Reads without the lock: a delta replaces each changed group with a new object (copy on
  write, `KeyedState.replace`), so a group read stands for one version of its key, and
  `wire` caches its encodings (the server's wire forms, one cache per form) tagged by that
  object. While a
  step is open (`open_step` .. `publish`), the first change to a key (a delta, an eviction)
  first keeps the key's group as it was in `before`: a read during the step takes those
  versions and so sees the last published epoch whole, never waiting for the step (Noria's
  evmap: readers read one copy while the writer fills the other).
- Taps (subscriptions): a key with taps hands each tap the changes applied to it, as
  they are applied (`Tap.capture`); a tapped key is pinned: never evicted here, and
  `eviction.evict` evicts nothing above a reader that holds pins (an eviction above could
  reach the pinned key below). A reader without taps pays one empty-dict test per delta.
- Replication (the server's hit replica): while `changed` is a set, every key whose group
  changes (a delta to a present key, a fill, an eviction) is added to it, and no other;
  whoever set it takes the set and sends those keys' rows on. None (the default) costs one
  test per change.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pomoview.dataflow.node import (
    EvictCols,
    KeyedNode,
    Node,
    group_by_key,
    matching_keys,
    rows_by_key,
)
from pomoview.dataflow.state.keyed_state import Key, KeyedState, Row
from pomoview.dataflow.upquery import Ask, Upquery, rows, run
from pomoview.dataflow.zset import ZSet

# `before`'s answer for a key the open step has not changed.
_UNCHANGED = object()
E = TypeVar("E")


class Tap(Protocol):
    def capture(self, changes: list[tuple[Row, int]]) -> None:
        """Called on the dataflow thread with the weighted rows applied to a tapped key (in
        one epoch a key may get several calls); it must not block."""


class Reader(KeyedNode):
    kind = "sink"

    def __init__(self, parent: Node, key_cols: tuple[int, ...], *, partial: bool) -> None:
        super().__init__(parent.schema, (parent,), key_cols, partial=partial)
        # The partial states above, whose keys a read marks as used too (set by the Graph):
        # a hot reader key keeps the upstream keys it was derived from, where those are
        # keyed alike, through eviction sweeps.
        self.upstream: list[KeyedState] = []
        # form -> key -> (the group object it was encoded from, its encoding in that form);
        # valid while the state still holds that very object for the key.
        self.wire: dict[str, dict[Key, tuple[object, Any]]] = {}
        # The eviction marks a read sets: those of this state and of the partial states in
        # `upstream`, cached for the lock-free read path (one set add each per key read).
        self._marks: list[set[Key]] = []
        self._marks_of: list[KeyedState] | None = None
        # key -> the taps (subscriptions) that receive its changes; each tapped key is present.
        self.taps: dict[Key, list[Tap]] = {}
        # While a step is open: key -> its group (None: missing) as of the last published
        # epoch, recorded before the step's first change to the key.
        self.before: dict[Key, object | None] = {}
        self._recording = False
        # The keys changed since the replica feed last took them; None: no feed.
        self.changed: set[Key] | None = None

    def open_step(self) -> None:
        """A step begins: keep the published version of every key it changes."""
        self._recording = True

    def publish(self) -> None:
        """The step's epoch is published: drop the old versions."""
        self._recording = False
        self.before = {}

    def _keep(self, keys: Iterable[Key]) -> None:
        """Keeps the published versions of `keys`, which are about to change."""
        if self._recording:
            before, peek = self.before, self.state.peek
            for key in keys:
                if key not in before:
                    before[key] = peek(key)

    def by_key(self, delta: ZSet[Row]) -> dict[Key, list[tuple[Row, int]]]:
        """The delta's weighted rows grouped by this reader's key."""
        return rows_by_key(delta.items(), self.key_cols)

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        by_key = self.by_key(delta)
        taps = self.taps
        self._keep(by_key)  # before any group changes: see the module docstring
        changed = self.changed
        for key, changes in by_key.items():
            if not self.state.replace(key, changes):
                self.metrics.dropped += len(changes)
                continue
            if changed is not None:
                changed.add(key)
            if taps and key in taps:
                for tap in taps[key]:
                    tap.capture(changes)
        return ZSet()

    def tap(self, keys: Collection[Key], tap: Tap) -> None:
        """Sends the changes of `keys` (present) to `tap` from now on, and pins them."""
        for key in keys:
            assert self.state.is_present(key), f"tap of missing key {key!r}"
            self.taps.setdefault(key, []).append(tap)
            if self.state.partial:
                self.state.pin(key)

    def want_whole(self, keys: Collection[Key]) -> None:
        """Before a subscription's lookup of `keys`: what must hold them whole from now on
        does (operators/top_k.py); a Reader's states above always do."""

    def untap(self, keys: Collection[Key], tap: Tap) -> None:
        """Undoes `tap(keys, tap)`."""
        for key in keys:
            taps = self.taps[key]
            taps.remove(tap)
            if not taps:
                del self.taps[key]
            if self.state.partial:
                self.state.unpin(key)

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        if self._recording or self.changed is not None:  # a join's eviction
            going = list(matching_keys(self.state, self.key_cols, cols, keys))
            self._keep(going)
            self._note(going)
        super().on_evict(port, cols, keys)
        self._drop_stale_wire()

    def evict_own(self, keys: Collection[Key]) -> int:
        self._note(keys)
        count = super().evict_own(keys)
        self._drop_stale_wire()
        return count

    def _drop_stale_wire(self) -> None:
        state = self.state
        for wire in list(self.wire.values()):
            for key in list(wire):  # one C call: safe against readers adding entries
                if state.peek(key) is None:
                    wire.pop(key, None)

    def encoded_all(
        self,
        keys: Sequence[Key],
        encode: Callable[[list[Row]], E],
        *,
        published: bool = False,
        form: str = "",
    ) -> list[E] | None:
        """The rows of each of `keys` as `encode` puts them on the wire (cached per version
        of the key's group, in the cache of `form`: one per encoding), or None as soon as one
        is missing (some may have been encoded by then). Safe without the dataflow lock when
        the caller checks afterwards that nothing was published meanwhile. `published`: a
        step is open, read each key as of the last published epoch (its `before` version).
        One call for a lookup's keys: a hit's cost per key is a few dict reads, and its
        eviction marks one set update per state."""
        wire = self.wire.get(form)
        if wire is None:
            wire = self.wire.setdefault(form, {})
        out = self._encode_each(keys, encode, wire, published)
        if out is None:
            return None
        self.mark_read(keys)
        return out

    def mark_read(self, keys: Collection[Key]) -> None:
        """Marks `keys` as read, here and in the partial states above (for eviction), safe
        without the dataflow lock. As `touch` on each state, but without its presence test
        upstream: a mark on a key a state lacks is dropped, unused, at its next sweep."""
        if self._marks_of is not self.upstream:
            self._marks = [s.hot for s in (self.state, *self.upstream) if s.partial]
            self._marks_of = self.upstream
        for marks in self._marks:
            marks.update(keys)

    def rows_of(self, key: Key) -> list[Row] | None:
        """The key's rows as lookups return them, or None when it is missing; no mark."""
        stored = self.state.peek(key)
        return None if stored is None else self.rows_in_order(self.state.view_of(key, stored))

    def _encode_each(
        self,
        keys: Sequence[Key],
        encode: Callable[[list[Row]], E],
        wire: dict[Key, tuple[object, Any]],
        published: bool,
    ) -> list[E] | None:
        """`encoded_all`'s answers, encoding what the cache lacks. Every key's group is read
        before `before` is: a step that changes a key keeps its old group in `before` first,
        so a group read here that is already the step's is found there. When every key's
        cached encoding is of its group and the open step changed none of them (a warm
        hit's common case) the answers are taken in one comprehension, else key by key."""
        groups = self.state.peek_all(keys)
        before = self.before
        if not published or before.keys().isdisjoint(keys):
            pairs = zip(map(wire.get, keys), groups, strict=True)
            out = [c[1] for c, g in pairs if c is not None and c[0] is g]
            if len(out) == len(keys):
                return out
        out = []
        for key, stored in zip(keys, groups, strict=True):
            current = True
            if published:
                old = before.get(key, _UNCHANGED)
                if old is not _UNCHANGED:
                    stored, current = old, stored is old
            if stored is None:
                return None
            cached = wire.get(key)
            if cached is not None and cached[0] is stored:
                out.append(cached[1])
            else:
                data = encode(self.rows_in_order(self.state.view_of(key, stored)))
                if current:  # an old version's encoding would only displace the new one's
                    wire[key] = (stored, data)
                out.append(data)
        return out

    def missing(self, keys: Sequence[Key]) -> list[Key]:
        return self.state.missing(keys)

    def read(self, key: Key, *, touch: bool = True) -> list[Row] | None:
        """The view's rows for `key`, or None when the key is missing. A read marks the key
        as used (`touch`), unless it is the read that follows the key's fill."""
        group = self.state.get(key)
        if group is None:
            return None
        if touch and self.state.partial:
            self.state.touch(key)
            for state in self.upstream:
                state.touch(key)
        # Invariant: the reader holds a set (a Distinct feeds it).
        assert all(w == 1 for w in group.values()), f"reader multiset at {key!r}: {group}"
        return self.rows_in_order(group)

    def rows_in_order(self, group: Mapping[Row, int]) -> list[Row]:
        """A key's rows as lookups return them (a view without an order: as held)."""
        return list(group)

    def fill_key(self, key: Key, rows: Iterable[tuple[Row, int]]) -> None:
        """Makes a missing key present with the rows of its upquery's answer."""
        self._note((key,))
        self.state.fill(key, rows)

    def _note(self, keys: Iterable[Key]) -> None:
        """Notes keys whose group changes (present before or after) for the replica feed."""
        if self.changed is not None:
            self.changed.update(keys)

    def lookup_step(self, keys: Sequence[Key]) -> list[list[Row]] | Upquery[list[list[Row]]]:
        """The rows of each key: a step for a `Walk`, which fills the missing keys with one
        upquery of the input first (the walk may take rounds, see upquery.py)."""
        if not self.state.missing(keys):
            return self._read_all(keys, frozenset())
        return self._fill_and_read(keys)

    def _fill_and_read(self, keys: Sequence[Key]) -> Upquery[list[list[Row]]]:
        filled: set[Key] = set()
        # Again after a fill: an eviction between the walk's rounds may have taken a key
        # that was present when the walk first looked.
        while missing := self.state.missing(keys):
            answer = yield rows(self.inputs[0], self.key_cols, missing)
            still = set(self.state.missing(missing))  # another walk may have filled some meanwhile
            for key, got in group_by_key(answer.items(), self.key_cols, missing).items():
                if key in still:
                    self.fill_key(key, got)
            self.metrics.filled_keys += len(still)
            filled.update(missing)
        return self._read_all(keys, frozenset(filled))

    def _read_all(self, keys: Sequence[Key], filled: frozenset[Key]) -> list[list[Row]]:
        results: list[list[Row]] = []
        for key in keys:
            found = self.read(key, touch=key not in filled)
            assert found is not None
            results.append(found)
        return results

    def lookup(self, keys: Sequence[Key]) -> list[list[Row]]:
        """`lookup_step` in one round, for fetches that always answer (tests, the engine)."""
        answer: list[list[Row]] = run(Ask(self.lookup_step, (keys,)))
        return answer

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise AssertionError("a reader is a sink; nothing upqueries it")
