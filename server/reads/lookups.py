"""Lookups: a lookup answers from a reader's state when every key is present; otherwise it
upqueries, in rounds on the dataflow lock, through `fetch`: a keyed Spark job over the
Parquet store at its version v (spark_fetch.py), plus the logged operations in (v, applied].
Each round either answers or names the Spark jobs it needs; those run without any lock
(coalesced with other lookups' in upquery_jobs.py), and the round runs again.

Hits (`hits`) answer without any lock, through the view state's sequence counter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from pomoview.dataflow.node import Fetch, FetchPending, Filters, matches
from pomoview.dataflow.state.int_set import IntSet
from pomoview.dataflow.state.keyed_state import Key, PackedRows, Row
from pomoview.planner.compile import CompiledProgram
from pomoview.planner.frontend.validate import Relation
from pomoview.server.errors import InvalidArgument, NotFound, Unavailable
from pomoview.server.metrics.counters import Counters
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.reads.spark_fetch import SESSION_DIED, Prefetched
from pomoview.server.reads.upquery_jobs import Ticket, UpqueryJobs
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.typed_rows import TypedRow, coerce_typed
from pomoview.server.types import Value
from pomoview.server.views.subscriptions import Subscription
from pomoview.server.views.view_state import ViewState

MAX_UPQUERY_ROUNDS = 64

OnAnswer = Callable[[tuple[str, ...], list[Key]], None]


class Lookups:
    """Lookups, lock-free hits and subscriptions over the view state's graph.

    Misses go to `upquery_jobs`; the fetches of transient sources and `p@next` relations
    are answered by the time path."""

    def __init__(
        self,
        view: ViewState,
        upquery_jobs: UpqueryJobs,
        time_path: TimePath,
        metrics: Metrics,
        counters: Counters,
    ) -> None:
        self._view = view
        self._jobs = upquery_jobs
        self._time = time_path
        self._metrics = metrics
        self._counters = counters

    def lookup(
        self,
        view: str,
        keys: Sequence[TypedRow],
        min_epoch: int | None = None,
        timeout: float | None = None,
        on_answer: OnAnswer | None = None,
    ) -> tuple[list[list[dict[str, Value]]], int]:
        """The rows of each key and the epoch they reflect. `on_answer(key_attrs, keys)` is
        called under the dataflow lock right after the rows were read, before any later
        epoch is applied (a subscription attaches there)."""
        state = self._view
        program = state.require_program()
        relation, key_attrs, key_tuples = self._keys_of(program, view, keys)
        if not keys:
            return [], state.applied_epoch
        if min_epoch is not None:
            state.wait_applied(min_epoch, None if timeout is None else time.monotonic() + timeout)
        started = time.perf_counter()
        answers: list[Prefetched] = []
        tickets: list[Ticket] = []
        missed = False
        try:
            # Each round either answers or names the Spark jobs it needs (every fetch it can
            # know of: both parents of a union, both sides of a join by its own columns);
            # they run together, without the lock, coalesced with other lookups' misses on
            # the same sources. Dependent upqueries (a join's other side, by the join keys
            # the first answer holds) take a round each, so a chain of n joins needs about
            # n + 1 rounds.
            for _ in range(MAX_UPQUERY_ROUNDS):
                with state.lock:
                    if state.program is not program:
                        raise Unavailable("the program was replaced during the lookup; retry")
                    try:
                        rows = self._lookup_locked(program, view, key_attrs, key_tuples, answers)
                    except FetchPending as pending:
                        needed = pending.requests
                        missed = True
                    else:
                        epoch = state.applied_epoch
                        if on_answer is not None:
                            on_answer(key_attrs, key_tuples)
                        if missed:
                            state.enforce_budget()  # after the answer is read: it is not evicted
                        break
                round_tickets = self._jobs.submit(needed)
                tickets.extend(round_tickets)
                answers.extend(self._await_fetches(round_tickets))
            else:
                raise Unavailable(f"the upquery for {view!r} did not settle in {MAX_UPQUERY_ROUNDS} rounds")
        finally:
            for ticket in tickets:
                ticket.release()
        if missed:
            self._counters.add_upquery()
            self._metrics.lookup_misses.inc()
            self._metrics.upquery_seconds.observe(time.perf_counter() - started)
        else:
            self._metrics.lookup_hits.inc()  # present on the locked path (e.g. after a min_epoch wait)
        attrs = relation.attributes
        return [[dict(zip(attrs, row, strict=True)) for row in group] for group in rows], epoch  # type: ignore[misc]

    def hits(
        self,
        view: str,
        keys: Sequence[TypedRow],
        min_epoch: int | None,
        encode: Callable[[list[Row]], bytes],
    ) -> tuple[list[bytes], int] | None:
        """The answer of a lookup whose keys are all present, each key's rows as `encode`
        puts them (cached per version of the key's group), and its epoch; None when a key
        is missing or the lookup must wait for an epoch (the caller then takes `lookup`).

        It takes no lock: epochs are applied under a sequence lock (the view state's `seq`,
        odd while one is being applied), so an answer read while `seq` stayed even and
        unchanged is the state at one applied epoch; otherwise it is None. Raises for bad
        keys as `lookup`.
        """
        state = self._view
        program = state.require_program()
        relation, key_attrs, key_tuples = self._keys_of(program, view, keys)
        seq = state.seq
        if seq & 1:
            return None
        epoch = state.applied_epoch
        graph = state.graph
        if (min_epoch is not None and min_epoch > epoch) or graph is None or graph.program is not program:
            return None
        reader = graph.graph.readers.get((view, key_attrs))
        if reader is None:
            return None
        out = []
        for key in key_tuples:
            data = reader.encoded(key, encode)
            if data is None:
                return None
            out.append(data)
        if state.seq != seq:
            return None
        self._metrics.lookup_hits.inc()
        return out, epoch

    def subscribe(
        self, view: str, keys: Sequence[TypedRow], timeout: float | None = None
    ) -> tuple[list[dict[str, Value]], int, Subscription]:
        """The rows of `keys` (each key once), the epoch E they reflect, and a subscription
        that receives every change to them after E (subscriptions.py). Missing keys are
        upqueried as a lookup's; the keys stay present until `unsubscribe`."""
        if not keys:
            raise InvalidArgument("a subscription needs at least one key")
        attached: list[tuple[Subscription, list[Key]]] = []
        state = self._view

        def attach(key_attrs: tuple[str, ...], key_tuples: list[Key]) -> None:
            graph = state.graph
            assert graph is not None
            reader = graph.graph.readers[(view, key_attrs)]
            sub = state.subscriptions.attach(view, reader, list(dict.fromkeys(key_tuples)))
            relation = graph.program.relations[view]
            sub.attributes = [(a, relation.types[a]) for a in relation.attributes]
            attached.append((sub, key_tuples))

        results, epoch = self.lookup(view, keys, None, timeout, on_answer=attach)
        [(sub, key_tuples)] = attached
        seen: set[Key] = set()
        rows = []
        for key, group in zip(key_tuples, results, strict=True):
            if key not in seen:  # a key asked twice: its rows once
                seen.add(key)
                rows.extend(group)
        return rows, epoch, sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Ends `sub` and releases its keys (idempotent)."""
        sub.close()
        with self._view.lock:
            self._view.subscriptions.detach(sub)

    # -- one round --------------------------------------------------------------------

    def _lookup_locked(
        self,
        program: CompiledProgram,
        view: str,
        key_attrs: tuple[str, ...],
        key_tuples: list[Key],
        answers: list[Prefetched],
    ) -> list[list[Row]]:
        fetch = self._fetch_from(answers)
        graph = self._view.graph
        assert graph is not None and graph.program is program
        try:
            # A new reader is built and its full states hydrated first; a FetchPending there
            # leaves the graph as it was.
            return graph.lookup(view, key_attrs, key_tuples, fetch)
        except FetchPending:
            raise  # every state is filled completely or untouched: keep the graph
        except Exception:
            # Anything else may have left a state half filled: start a new graph so that it
            # is never read (operator state is a cache; the next lookups refill it).
            self._view.reset_graph()
            raise

    def _fetch_from(self, answers: list[Prefetched]) -> Fetch:
        """A Fetch for the dataflow that answers from Spark results fetched before this round.

        It runs on the dataflow lock, so the applied epoch and the log tail stand still
        while it advances a snapshot to the applied epoch with the logged writes after it.
        A request no answer covers raises FetchPending: the lookup then runs that Spark
        job without the lock, and tries again.

        An answer at version v is advanced with the tail's batches after v. The job pinned
        v before it ran (`UpqueryPins`), and the flusher never trims the tail past a pinned
        version, so the tail still holds them. Only a bulk load moves the tail's base past a
        pinned version: its rows never pass through the log, so the answers from before it
        are stale (`version < base`) and are fetched again.
        """
        state = self._view

        def fetch(
            source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
        ) -> Iterable[Row]:
            held = self._time.fetch(source, cols, keys, filters)  # transient and p@next
            if held is not None:
                return held
            wanted = set(keys)
            for answer in answers:
                if (
                    answer.source == source
                    and answer.columns == cols
                    and wanted <= answer.keys
                    and set(answer.filters) <= set(filters)
                    and answer.version >= state.tail.base
                ):
                    schema = [a for a, _ in state.require_program().source_schema(source)]
                    positions = [schema.index(c) for c in cols]
                    tests = tuple((schema.index(a), v) for a, v in filters)
                    if answer.packed is not None:
                        assert answer.layout is not None
                        if set(answer.filters) == set(filters):
                            return self._packed_answer(answer, wanted, tests)
                        make = answer.layout.row
                        tuples = [
                            make(k, v)
                            for k in wanted
                            if k in answer.packed
                            for v in answer.packed[k].tolist()
                        ]
                    else:
                        tuples = [t for k in wanted for t in answer.by_key.get(k, ())]
                    if set(answer.filters) != set(filters):
                        tuples = [t for t in tuples if matches(t, tests)]
                    return state.tail.overlay(
                        source, tuples, answer.version, state.applied_epoch, positions, keys, tests
                    )
            raise FetchPending(source, cols, keys, filters)

        return fetch

    def _packed_answer(
        self, answer: Prefetched, wanted: set[Key], tests: Filters
    ) -> PackedRows:
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
            if not matches(t, tests):  # type: ignore[arg-type]
                continue
            value = t[value_pos]
            if op > 0 and value not in group:
                group.add(value)  # type: ignore[arg-type]
            elif op < 0 and value in group:
                group.discard(value)  # type: ignore[arg-type]
        return PackedRows(layout, groups)

    def _await_fetches(self, tickets: Sequence[Ticket]) -> list[Prefetched]:
        """The answers of one round's jobs (coalesced with other lookups' in `upquery_jobs`)."""
        answers: list[Prefetched] = []
        failures: list[BaseException] = []
        for ticket in tickets:
            try:
                answers.append(ticket.wait())  # type: ignore[arg-type]
            except BaseException as err:
                failures.append(err)
        if failures:
            # When the JVM died, every job of the round fails; only the one whose check found
            # the session dead says so (the others may look after a new session is up).
            failures.sort(key=lambda err: SESSION_DIED not in str(err))
            raise failures[0]
        return answers

    # -- keys ---------------------------------------------------------------------------

    def _keys_of(
        self, program: CompiledProgram, view: str, keys: Sequence[TypedRow]
    ) -> tuple[Relation, tuple[str, ...], list[Key]]:
        """The view, its key attributes (in declared order) and the keys as tuples of
        values of the attributes' types; raises for an unknown view, attribute or type."""
        relation = program.relations.get(view)
        if view not in program.views or relation is None:
            known = ", ".join(sorted(program.views)) or "none"
            raise NotFound(f"no view named {view!r} (views: {known})")
        if not keys:
            return relation, (), []
        key_attrs = tuple(keys[0])
        named = set(key_attrs)
        for i, key in enumerate(keys):
            if key.keys() != named:
                raise InvalidArgument(f"keys[{i}] names {sorted(key)}, keys[0] names {sorted(key_attrs)}")
        unknown = [a for a in key_attrs if a not in relation.attributes]
        if unknown:
            raise InvalidArgument(
                f"{view!r} has no attribute {', '.join(map(repr, unknown))} "
                f"(it has {', '.join(relation.attributes)})"
            )
        key_attrs = tuple(a for a in relation.attributes if a in key_attrs)
        typed = [(a, relation.types[a]) for a in key_attrs]
        key_tuples = []
        for i, k in enumerate(keys):
            values = []
            for a, t in typed:
                kind, raw = k[a]
                # Hits come here for every key of every read: the message of a bad key is
                # only formatted for a bad key.
                values.append(raw if kind == t else coerce_typed(k[a], t, f"keys[{i}].{a}"))
            key_tuples.append(tuple(values))
        return relation, key_attrs, key_tuples
