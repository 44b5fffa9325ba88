"""The dataflow's Fetch during a lookup's round: the Spark answers at hand, advanced to the
applied epoch with the log tail, or None for a request none of them covers (the walk then
reports a miss, and the lookup runs that keyed Spark job before its next round).

An answer at version v is advanced with the tail's batches after v. The job pinned v before
it ran (`UpqueryPins`), and the flusher never trims the tail past a pinned version, so the
tail still holds them. Only a bulk load moves the tail's base past a pinned version: its
rows never pass through the log, so the answers from before it are stale (`version < base`)
and are fetched again.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pomoview.dataflow.node import FetchRequest, Filters, Window, WindowRows, matches
from pomoview.dataflow.state.int_set import IntSet
from pomoview.dataflow.state.keyed_state import Key, PackedRows, Row
from pomoview.server.reads.spark_fetch import Prefetched
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.views.introspection import Introspection
from pomoview.server.views.view_state import ViewState


class AnswersAtHand:
    """A Fetch over the answers of a lookup's Spark jobs so far (`answers` grows between
    rounds). Called on the dataflow lock only, so the applied epoch and the log tail stand
    still while it advances an answer to the applied epoch."""

    def __init__(self, view: ViewState, time_path: TimePath, introspection: Introspection) -> None:
        self._view = view
        self._time = time_path
        self._introspection = introspection  # the built-in sources' rows
        self.answers: list[Prefetched] = []

    def __call__(
        self, source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
    ) -> Iterable[Row] | None:
        held = self._time.fetch(source, cols, keys, filters)  # transient and p@next
        if held is None:
            held = self._introspection.fetch(source, cols, keys, filters)
        if held is not None:
            return held
        wanted = set(keys)
        answer = self._covering(source, cols, wanted, filters)
        if answer is None:
            return None
        state = self._view
        positions, tests = self._positions(source, cols, filters)
        if answer.packed is not None:
            assert answer.layout is not None
            if set(answer.filters) == set(filters):
                return self._packed(answer, wanted, tests)
            make = answer.layout.row
            tuples = [make(k, v) for k in wanted if k in answer.packed for v in answer.packed[k].tolist()]
        else:
            tuples = [t for k in wanted for t in answer.by_key.get(k, ())]
        if set(answer.filters) != set(filters):
            tuples = [t for t in tuples if matches(t, tests)]
        return state.tail.overlay(source, tuples, answer.version, state.applied_epoch, positions, keys, tests)

    def prepare(self, answers: list[Prefetched]) -> None:
        """Before the round that reads `answers` (new Spark answers), without the dataflow
        lock: builds the log tail's indexes that advancing them will read, so that the round
        holds the lock for the overlay only, not for indexing every batch logged while the
        jobs ran (LogTail.prepare)."""
        tail, program = self._view.tail, self._view.program
        for answer in answers:
            relation = None if program is None else program.relations.get(answer.source)
            if relation is None or not answer.columns or answer.version < tail.base:
                continue  # the program was replaced (the round says so), or a whole-source answer
            positions = [relation.attributes.index(c) for c in answer.columns]
            tail.prepare(answer.source, positions, answer.version)

    def _covering(
        self, source: str, cols: tuple[str, ...], wanted: set[Key], filters: Filters
    ) -> Prefetched | None:
        """An answer that holds every wanted key of the request, fetched after the tail's
        base (see the module docstring)."""
        base = self._view.tail.base
        for answer in self.answers:
            if (
                answer.source == source
                and answer.columns == cols
                and wanted <= answer.keys
                and set(answer.filters) <= set(filters)
                and answer.version >= base
                and answer.window is None
            ):
                return answer
        return None

    def window(
        self, source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters, window: Window
    ) -> WindowRows | None:
        """A windowed fetch (a SourceWindow's): the job's first tuples of each key, and the
        keys' tuples advanced to the applied epoch with the log tail; None when no answer
        at hand is of that window, with these filters, and holds every key."""
        wanted = set(keys)
        base = self._view.tail.base
        answer = next(
            (
                a
                for a in self.answers
                if a.source == source
                and a.columns == cols
                and a.window is not None
                and a.window.order == window.order
                and a.window.count >= window.count  # a wider job (`widen`) answers too
                and set(a.filters) == set(filters)
                and wanted <= a.keys
                and a.version >= base
            ),
            None,
        )
        if answer is None:
            return None
        state = self._view
        positions, tests = self._positions(source, cols, filters)
        fetched: dict[Key, list[Row]] = {k: list[Row](answer.by_key[k]) for k in wanted if k in answer.by_key}
        tuples = [t for got in fetched.values() for t in got]
        now = state.tail.overlay(source, tuples, answer.version, state.applied_epoch, positions, keys, tests)
        return WindowRows(list(now), fetched)

    def _positions(
        self, source: str, cols: tuple[str, ...], filters: Filters
    ) -> tuple[list[int], tuple[tuple[int, Any], ...]]:
        """The positions of `cols` in the source's tuples, and `filters` as (position,
        value) tests."""
        schema = [a for a, _ in self._view.require_program().source_schema(source)]
        return [schema.index(c) for c in cols], tuple((schema.index(a), v) for a, v in filters)

    def widen(self, misses: list[FetchRequest]) -> list[FetchRequest]:
        """The round's misses, each windowed one asking for as many more tuples of a key as
        the log holds deletes of one of its keys after the store's version: its job reads the
        store, and those deletes, applied over the answer, would leave a window short of
        its count (and the fill would ask again, a second job)."""
        out = []
        tail, applied = self._view.tail, self._view.applied_epoch
        for miss in misses:
            if miss.window is None:
                out.append(miss)
                continue
            positions, _ = self._positions(miss.source, miss.columns, ())
            ops = tail.key_operations(miss.source, positions, miss.keys, tail.base, applied)
            deletes = Counter(tuple(t[i] for i in positions) for t, op in ops if op < 0)
            extra = max(deletes.values(), default=0)
            window = Window(miss.window.order, miss.window.count + extra)
            out.append(dataclasses.replace(miss, window=window) if extra else miss)
        return out

    def _packed(self, answer: Prefetched, wanted: set[Key], tests: tuple[tuple[int, Any], ...]) -> PackedRows:
        """A packed answer advanced to the applied epoch: each key's values from the Spark
        job (shared with other lookups, so each gets its own sets), then the logged
        operations after the job's version, in order."""
        layout, packed = answer.layout, answer.packed
        assert layout is not None and packed is not None
        groups: dict[Key, IntSet] = {}
        for k in wanted:
            values = packed.get(k)
            groups[k] = IntSet() if values is None else IntSet.of_sorted_unique(values)
        key_pos, value_pos = layout.key_cols[0], layout.value_pos
        operations = self._view.tail.key_operations(
            answer.source, (key_pos,), wanted, answer.version, self._view.applied_epoch
        )
        for t, op in operations:
            group = groups[(t[key_pos],)]
            if not matches(t, tests):
                continue
            value = t[value_pos]
            if op > 0 and value not in group:
                group.add(value)  # type: ignore[arg-type]
            elif op < 0 and value in group:
                group.discard(value)  # type: ignore[arg-type]
        return PackedRows(layout, groups)
