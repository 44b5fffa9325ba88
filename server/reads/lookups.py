"""Lookups: a lookup answers from a reader's state when every key is present; otherwise it
runs as a walk in rounds (planner/compile.py's PendingLookup over dataflow/upquery.py's
Walk). A round holds the dataflow lock, advances the walk with the Spark answers at hand
(at_hand.py) and returns the rows or the fetches it missed; the missed fetches run as keyed
Spark jobs without any lock (coalesced with other lookups' in upquery_jobs.py), and the next
round resumes the walk where it stopped. A cold lookup of a join whose keys are the asked
keys thus holds the lock twice (one round names both sides' fetches, the next answers).

Hits (`hits`) answer without any lock, through the view state's sequence counter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar, cast

from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.planner.compile import (
    CompiledProgram,
    LookupResult,
    PendingLookup,
    PendingSettle,
    ProgramGraph,
    ShortWindows,
)
from pomoview.planner.frontend.validate import Relation
from pomoview.server.errors import InvalidArgument, NotFound, Unavailable
from pomoview.server.metrics.counters import Counters
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.reads.at_hand import AnswersAtHand
from pomoview.server.reads.spark_fetch import SESSION_DIED, Prefetched
from pomoview.server.reads.upquery_jobs import Ticket, UpqueryJobs
from pomoview.server.temporal.time_path import TimePath
from pomoview.server.typed_rows import Rows, TypedKeys, typed_keys
from pomoview.server.views.introspection import Introspection
from pomoview.server.views.subscriptions import Subscription
from pomoview.server.views.view_state import ViewState

log = logging.getLogger("pomoview.lookups")
OnAnswer = Callable[[tuple[str, ...], list[Key]], None]
# A hit reads again when an epoch was published while it read; after this many tries (a
# burst of tiny steps), the locked path answers it.
HIT_TRIES = 4
T = TypeVar("T")
Pending = PendingLookup | PendingSettle  # a walk run in rounds
E = TypeVar("E")


@dataclass
class LookupTrace:
    """What one lookup did, for tests and benchmarks that pass one in: its rounds on the
    dataflow lock, its walk's node visits over all rounds, and the fetches it missed."""

    rounds: int = 0
    steps: int = 0
    fetches: int = 0


class Lookups:
    """Lookups, lock-free hits and subscriptions over the view state's graph.

    Misses go to `upquery_jobs`; the fetches of transient sources and `p@next` relations
    are answered by the time path, those of the built-in sources by `introspection`."""

    def __init__(
        self,
        view: ViewState,
        upquery_jobs: UpqueryJobs,
        time_path: TimePath,
        metrics: Metrics,
        counters: Counters,
        introspection: Introspection,
    ) -> None:
        self._view = view
        self._introspection = introspection
        self._jobs = upquery_jobs
        self._time = time_path
        self._metrics = metrics
        self._counters = counters
        # One thread looks up the windows steps left short again (`refill`).
        self._refills = ThreadPoolExecutor(max_workers=1, thread_name_prefix="window-refill")

    def lookup(
        self,
        view: str,
        keys: Rows,
        min_epoch: int | None = None,
        timeout: float | None = None,
        on_answer: OnAnswer | None = None,
        trace: LookupTrace | None = None,
        *,
        whole: bool = False,
    ) -> tuple[list[list[dict[str, object]]], int]:
        """The rows of each key and the epoch they reflect. `on_answer(key_attrs, keys)` is
        called under the dataflow lock right after the rows were read, before any later
        epoch is applied (a subscription attaches there). `whole`: the reader's states hold
        the keys whole from now on (a subscription's: see `PendingLookup`)."""
        rows, epoch = self.lookup_rows(view, keys, min_epoch, timeout, on_answer, trace, whole=whole)
        attrs = view_relation(self._view.require_program(), view).attributes
        return [[dict(zip(attrs, row, strict=True)) for row in group] for group in rows], epoch

    def lookup_rows(
        self,
        view: str,
        keys: Rows,
        min_epoch: int | None = None,
        timeout: float | None = None,
        on_answer: OnAnswer | None = None,
        trace: LookupTrace | None = None,
        *,
        whole: bool = False,
    ) -> tuple[list[list[Row]], int]:
        """`lookup`, each row a tuple in the view's attribute order (and key order: an
        ordered view's rows in its order)."""
        program = self._view.require_program()
        _, key_attrs, key_tuples = self._keys_of(program, view, keys)
        if not keys:
            return [], self._view.applied_epoch
        self._wait(min_epoch, timeout)

        def read(_: Reader, rows: list[list[Row]]) -> list[list[Row]]:
            return rows

        return self._rounds(program, view, key_attrs, key_tuples, read, on_answer, trace, whole)

    def lookup_encoded(
        self,
        view: str,
        keys: Rows | TypedKeys,
        min_epoch: int | None,
        timeout: float | None,
        encoder: Callable[[CompiledProgram, str], Callable[[list[Row]], E]],
        form: str = "",
    ) -> tuple[list[E], int]:
        """`lookup`, each key's rows as `encoder(program, view)` puts them: the encoding is
        made in the answering round from the reader's groups and cached there (in the cache
        of `form`), as a hit's is, so the first hit after a miss encodes nothing."""
        program = self._view.require_program()
        _, key_attrs, key_tuples = self._keys_of(program, view, keys)
        encode = encoder(program, view)
        if not keys:
            return [], self._view.applied_epoch
        self._wait(min_epoch, timeout)

        def read(reader: Reader, _: list[list[Row]]) -> list[E]:
            out = reader.encoded_all(key_tuples, encode, form=form)
            assert out is not None, "an answered key is present in its reader"
            return out

        return self._rounds(program, view, key_attrs, key_tuples, read, None, None)

    def _wait(self, min_epoch: int | None, timeout: float | None) -> None:
        if min_epoch is not None:
            self._view.wait_applied(min_epoch, None if timeout is None else time.monotonic() + timeout)

    def _rounds(
        self,
        program: CompiledProgram,
        view: str,
        key_attrs: tuple[str, ...],
        key_tuples: list[Key],
        read: Callable[[Reader, list[list[Row]]], T],
        on_answer: OnAnswer | None,
        trace: LookupTrace | None,
        whole: bool = False,
    ) -> tuple[T, int]:
        """Runs the lookup's walk in rounds until it answers; `read` makes the answer from the
        reader and its rows, under the lock of the answering round."""

        def start(graph: ProgramGraph) -> Pending:
            return graph.start_lookup(view, key_attrs, key_tuples, whole=whole)

        def answered(graph: ProgramGraph, rows: list[list[Row]]) -> T:
            answer = read(graph.graph.readers[(view, key_attrs)], rows)
            if on_answer is not None:
                on_answer(key_attrs, key_tuples)
            return answer

        return self._walk_rounds(program, start, answered, trace)

    def _walk_rounds(
        self,
        program: CompiledProgram,
        start: Callable[[ProgramGraph], Pending],
        answered: Callable[[ProgramGraph, list[list[Row]]], T],
        trace: LookupTrace | None,
    ) -> tuple[T, int]:
        """Runs a walk (`start`'s, on the graph of its first round) in rounds until it is
        done; `answered` makes the answer under the lock of the last round."""
        state = self._view
        started = time.perf_counter()
        at_hand = AnswersAtHand(state, self._time, self._introspection)
        pending: Pending | None = None
        tickets: list[Ticket] = []
        missed = False
        try:
            while True:
                with state.lock:
                    if state.program is not program:
                        raise Unavailable("the program was replaced during the lookup; retry")
                    graph = state.graph
                    assert graph is not None and graph.program is program
                    if pending is None or pending.graph is not graph:
                        # First round, or the graph was rebuilt between rounds: the walk starts
                        # on the new graph (the answers at hand still serve it).
                        pending = start(graph)
                    result = self._round(pending, at_hand)
                    misses = at_hand.widen(result.misses)
                    if trace is not None:
                        trace.rounds += 1
                        trace.steps += result.steps
                        trace.fetches += len(misses)
                    if result.rows is not None:
                        answer = answered(graph, result.rows)
                        epoch = state.applied_epoch
                        # What the walk's fills changed in subscribed keys (a recursive
                        # view's pinned keys, as its demand grew) goes out now, at the applied
                        # epoch, not at the next write's.
                        state.subscriptions.seal(epoch)
                        # After the answer is read (it is not evicted); also after a fill
                        # made in memory (a recursive view's demand: more than the reader's
                        # one step), which adds state without any Spark job.
                        if missed or result.steps > 1:
                            state.enforce_budget()
                        break
                missed = True
                round_tickets = self._jobs.submit(misses)
                tickets.extend(round_tickets)
                answers = self._await_fetches(round_tickets)
                at_hand.prepare(answers)
                at_hand.answers.extend(answers)
        finally:
            for ticket in tickets:
                ticket.release()
        self._count(missed, started)
        return answer, epoch

    def _round(self, pending: Pending, at_hand: AnswersAtHand) -> LookupResult:
        """One round of the walk (caller holds the dataflow lock)."""
        try:
            result = pending.advance(at_hand, at_hand.window)
        except Exception:
            # A walk stops at a miss with every state filled completely or untouched; anything
            # raised may have left a state half filled: start a new graph so that it is never
            # read (operator state is a cache; the next lookups refill it).
            self._view.reset_graph()
            raise
        return result

    def _count(self, missed: bool, started: float) -> None:
        if missed:
            self._counters.add_upquery()
            self._metrics.lookup_misses.inc()
            self._metrics.upquery_seconds.observe(time.perf_counter() - started)
        else:
            self._metrics.lookup_hits.inc()  # present on the locked path (e.g. after a min_epoch wait)

    def hits(
        self,
        view: str,
        keys: Rows | TypedKeys,
        min_epoch: int | None,
        encode: Callable[[list[Row]], E],
        form: str = "",
    ) -> tuple[list[E], int] | None:
        """The answer of a lookup whose keys are all present, each key's rows as `encode`
        puts them (cached per version of the key's group, in the cache of `form`), and its
        epoch; None when a key is missing or the lookup must wait for an epoch (the caller
        then takes `lookup`).

        It takes no lock and never waits for an apply: it reads the view state's `published`
        snapshot (the graph, the last applied epoch, and whether a step is open, when the
        readers' groups as of that epoch are their `before` versions), and trusts what it
        read only if the snapshot was not replaced meanwhile (else it reads again, a few
        times, then gives up). Raises for bad keys as `lookup`.
        """
        state = self._view
        program = state.require_program()
        _, key_attrs, key_tuples = self._keys_of(program, view, keys)
        for _ in range(HIT_TRIES):
            pub = state.published
            graph = pub.graph
            if graph is None or graph.program is not program:
                return None
            if min_epoch is not None and min_epoch > pub.epoch:
                return None  # the locked path waits for that epoch, and for no other
            reader = graph.graph.readers.get((view, key_attrs))
            if reader is None:
                return None
            out = reader.encoded_all(key_tuples, encode, published=bool(pub.seq & 1), form=form)
            if out is None:
                return None
            if state.published is pub:
                self._metrics.lookup_hits.inc()
                return out, pub.epoch
        return None

    def refill(self, windows: ShortWindows) -> None:
        """Looks up again, in the background, the keys of ordered views whose windows a step
        evicted short (dataflow/operators/source_window.py): the next read of one finds it
        filled, or waits on the Spark job already fetching it, rather than starting one."""
        for view, key_attrs, keys in windows:
            self._refills.submit(self._refill, view, key_attrs, keys)

    def _refill(self, view: str, key_attrs: tuple[str, ...], keys: list[Key]) -> None:
        program = self._view.program
        if program is None:
            return
        try:
            self._rounds(program, view, key_attrs, keys, lambda _reader, _rows: None, None, None)
        except Exception as err:  # a failed refill changes nothing: a read fills the keys
            log.info("the background refill of %s %s failed: %s", view, keys[:5], err)

    def settle(self, gates: list[DemandGate]) -> None:
        """Fills, in the background, what `gates`' slices lack under keys that subscriptions
        pin (a write reached keys the slices never fetched: `DemandGate.evict_settled`), so
        that the subscriptions get those rows without waiting for the next lookup."""
        for gate in gates:
            self._refills.submit(self._settle, gate)

    def _settle(self, gate: DemandGate) -> None:
        program, first = self._view.program, self._view.graph
        if program is None or first is None:
            return

        def start(graph: ProgramGraph) -> Pending:
            if graph is not first:  # rebuilt: its subscriptions ended with the old one
                raise Unavailable("the graph was rebuilt; nothing to settle")
            return graph.start_settle(gate)

        try:
            self._walk_rounds(program, start, lambda _graph, _rows: None, None)
        except Exception as err:  # a failed fill changes nothing: the next lookup fills
            log.info("the background fill of %s failed: %s", gate.describe(), err)

    def close(self) -> None:
        self._refills.shutdown(wait=False, cancel_futures=True)

    def subscribe(
        self, view: str, keys: Rows, timeout: float | None = None
    ) -> tuple[list[dict[str, object]], int, Subscription]:
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

        results, epoch = self.lookup(view, keys, None, timeout, on_answer=attach, whole=True)
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
        self, program: CompiledProgram, view: str, keys: Rows | TypedKeys
    ) -> tuple[Relation, tuple[str, ...], list[Key]]:
        """The view, its key attributes (in declared order) and the keys as tuples of
        values of the attributes' types; raises for an unknown view, attribute or type.
        Keys as columns are checked as a write's columns are (typed_rows.to_tuples)."""
        relation = view_relation(program, view)
        key_attrs, key_tuples = typed_keys(relation, view, keys)
        return relation, key_attrs, cast(list[Key], key_tuples)  # a Value is a Key's object


def view_relation(program: CompiledProgram, view: str) -> Relation:
    """The relation of the view named `view`; NotFound, naming the views, when there is none."""
    relation = program.relations.get(view)
    if view not in program.views or relation is None:
        known = ", ".join(sorted(program.views)) or "none"
        raise NotFound(f"no view named {view!r} (views: {known})")
    return relation
