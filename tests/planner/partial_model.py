"""A driver for partial state under interleavings, and its oracles (test_partial_invariants.py).

The system under test is a ProgramGraph(partial=True) over in-memory sources, driven as the
server drives it: a lookup runs in rounds (`PendingLookup`), each returning the rows or the
fetches it missed; those are held while other steps run (writes, other lookups,
evictions), then answered from the sources *as they are when the lookup resumes*, which is
what the server's keyed Spark job plus the logged writes in (snapshot, now] give. The
reference is a ProgramGraph(partial=False) stepped with the same changes, and, for
invariant 1, every operator's output recomputed from scratch.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import (
    FetchRequest,
    Filters,
    KeyedNode,
    Node,
    Window,
    WindowRows,
    fetch_from,
    project,
)
from pomoview.dataflow.operators.aggregate_join import AggregateJoin
from pomoview.dataflow.operators.in_order import InOrder
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.source_window import SourceWindow
from pomoview.dataflow.operators.top_k import TopK
from pomoview.dataflow.state.keyed_pair import KeyedPair
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.builder.circuit_builder import CircuitBuilder
from pomoview.planner.compile import CompiledProgram, PendingLookup, ProgramGraph
from pomoview.planner.ir.provenance import Keyed


@dataclass
class Pending:
    """A lookup waiting for its fetches."""

    view: str
    key: tuple[str, ...]
    values: list[Key]
    requests: set[FetchRequest] = field(default_factory=set)  # answered at the next try
    # Fetches a driver holds back (their Spark jobs still running): it moves them to
    # `requests` when it lets them finish, so that one round's fetches finish apart.
    held: set[FetchRequest] = field(default_factory=set)
    epoch: int = 0  # the epoch it began at
    rounds: int = 0  # rounds that missed (counted by the driver)
    lookup: PendingLookup | None = None  # the walk, resumed at each attempt
    steps: int = 0  # node visits of every attempt


class Model:
    def __init__(self, program: CompiledProgram, *, binary_joins: bool = False, sliced: bool = False) -> None:
        """`binary_joins`: both graphs, and invariant 1's from-scratch computations, plan
        cyclic rule bodies as binary joins (no WcojJoin). `sliced`: the partial graph's
        demanded readers (of recursive and cyclic views) read every source through slices,
        as the server does with sources larger than --whole-source-rows (else whole)."""
        self.program = program
        self.binary_joins = binary_joins
        self.store: dict[str, set[Row]] = {s: set() for s in program.checked.sources}
        hold_whole = (lambda _: False) if sliced else None
        self.partial = ProgramGraph(program, partial=True, binary_joins=binary_joins, hold_whole=hold_whole)
        self.full = ProgramGraph(program, partial=False, binary_joins=binary_joins)
        self.fetches = 0
        self.epoch = 0  # writes so far
        # A windowed fetch's source as its job saw it (when the lookup missed it): the
        # job's first tuples come from there, the writes since from the log (at_hand.py).
        self.snapshots: dict[FetchRequest, set[Row]] = {}
        self.windowed_fetches = 0

    # -- sources --------------------------------------------------------------------------

    def attributes(self, source: str) -> tuple[str, ...]:
        return tuple(self.program.relations[source].attributes)

    def now(self, source: str, names: tuple[str, ...], keys: Iterable[Key], filters: Filters) -> list[Row]:
        """The source's tuples now, restricted like a keyed fetch."""
        return fetch_from(self.store[source], self.attributes(source), names, keys, filters)

    def write(self, changes: dict[str, dict[Row, int]]) -> None:
        """One epoch: `changes` maps a source to row -> +1 (insert) / -1 (delete)."""
        deltas: dict[str, ZSet[Row]] = {}
        for source, ops in changes.items():
            present = self.store[source]
            delta: ZSet[Row] = ZSet()
            for row, op in ops.items():
                if op > 0 and row not in present:
                    present.add(row)
                    delta.add(row, 1)
                elif op < 0 and row in present:
                    present.discard(row)
                    delta.add(row, -1)
            # Like the server: the graph gets the batch's operations, the sources the set change.
            deltas[source] = ZSet([(row, 1 if op > 0 else -1) for row, op in ops.items()])
        self.partial.step(deltas)
        self.full.step(deltas)
        self.epoch += 1

    # -- lookups ----------------------------------------------------------------------------

    def begin(self, view: str, key: tuple[str, ...], values: list[Key]) -> Pending:
        return Pending(view, key, values, epoch=self.epoch)

    def attempt(self, pending: Pending) -> list[list[Row]] | None:
        """Runs the lookup with the requests it holds answered from the sources now; returns
        the rows, or None when it needs more fetches (they are added to `pending`)."""

        def fetch(source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row] | None:
            for r in pending.requests:
                if (
                    r.source == source
                    and r.columns == names
                    and set(keys) <= set(r.keys)
                    and set(r.filters) <= set(filters)
                ):
                    self.fetches += 1
                    return self.now(source, names, keys, filters)
            return None

        def fetch_window(
            source: str, names: tuple[str, ...], keys: list[Key], filters: Filters, window: Window
        ) -> WindowRows | None:
            for r in pending.requests:
                if (
                    r.window == window
                    and r.source == source
                    and r.columns == names
                    and set(keys) <= set(r.keys)
                    and set(r.filters) == set(filters)
                ):
                    self.windowed_fetches += 1
                    return self.window_answer(source, names, keys, filters, window, self.snapshots[r])
            return None

        if pending.lookup is None or pending.lookup.graph is not self.partial:
            pending.lookup = self.partial.start_lookup(pending.view, pending.key, pending.values)
        result = pending.lookup.advance(fetch, fetch_window)
        pending.steps += result.steps
        if result.rows is None:
            pending.requests.update(result.misses)
            for miss in result.misses:
                if miss.window is not None:
                    self.snapshots.setdefault(miss, set(self.store[miss.source]))
            return None
        pending.lookup = None  # done: a later attempt looks up again
        return result.rows

    def window_answer(
        self,
        source: str,
        names: tuple[str, ...],
        keys: list[Key],
        filters: Filters,
        window: Window,
        snapshot: set[Row],
    ) -> WindowRows:
        """What the server's windowed fetch answers: each key's first `window.count` tuples
        of the source at the job's `snapshot` (in the window's order, as Spark sorts them),
        and the keys' tuples as the log advances those to now (at_hand.py)."""
        attributes = self.attributes(source)
        cols = tuple(attributes.index(n) for n in names)
        then = fetch_from(snapshot, attributes, names, keys, filters)
        for name, descending in reversed(window.order):  # stable sorts, the last key first
            position = attributes.index(name)
            then.sort(key=lambda row: row[position], reverse=descending)
        fetched: dict[Key, list[Row]] = {}
        for row in then:
            got = fetched.setdefault(project(row, cols), [])
            if len(got) < window.count:
                got.append(row)
        now = set(self.now(source, names, keys, filters))
        first = [row for got in fetched.values() for row in got]
        rows = [row for row in first if row in now] + [row for row in now if row not in snapshot]
        return WindowRows(rows, fetched)

    def reference(self, view: str, key: tuple[str, ...], values: list[Key]) -> list[set[Row]]:
        rows = self.full.lookup(view, key, values, self.now)
        return [set(r) for r in rows]

    def evict(self, rng: random.Random) -> str | None:
        """Memory pressure: evicts one to three keys of a random partial state (the least
        recently used ones, or at random), with what below was derived from them; or, once
        in eight, an eviction asked for by name (the server's Evict): every key of every
        partial state, or some or all keys of a reader. Returns what it did, or None when
        no partial state has a present key."""
        if rng.random() < 0.125:
            return self.evict_by_name(rng)
        nodes = [
            n
            for n in self.partial.graph.nodes
            if (state := n.eviction_state()) is not None and state.present_keys()
        ]
        if not nodes:
            return None
        node = rng.choice(nodes)
        state = node.eviction_state()
        assert state is not None
        count = rng.randint(1, 3)
        if rng.random() < 0.5:
            keys = state.sweep(count)
        else:
            keys = rng.sample(sorted(state.keys(), key=repr), min(count, state.present_keys()))
        evicted = node.evict_own(keys)
        assert evicted == len(keys), f"{node.describe()}: {evicted} of {keys} were present"
        assert all(state.get(k) is None for k in keys)
        return f"evict {keys} at {node.describe()}"

    def evict_by_name(self, rng: random.Random) -> str:
        """`Graph.evict_everything` or `Graph.evict_reader_keys`, checked: what it evicts is
        gone (every unpinned key of every partial state, or the reader's keys asked)."""
        graph = self.partial.graph
        # The fully materialized graph (the reference) keeps everything: a full reader answers
        # a key it does not hold as empty, so an eviction there would change the answers.
        full = self.full.graph
        assert full.evict_everything().keys == 0
        for name in full.readers:
            assert full.evict_reader_keys(name, None)[0].keys == 0
        readers = [name for name, r in graph.readers.items() if r.partial and r.state.present_keys()]
        if not readers or rng.random() < 0.4:
            slices, size = 1, None if rng.random() < 0.5 else rng.randint(1, 4)
            # With a size, in slices, as the server's Evict takes them (a hold of its lock each).
            while not (done := graph.evict_everything(max_keys=size)).done:
                assert size is not None and 0 < done.keys <= size, done
                graph.check_invariants()
                slices += 1
            for node in graph.nodes:
                state = node.eviction_state()
                assert state is None or all(k in state.pinned for k in state.keys()), node.describe()
            sliced = f" in {slices} slices of {size}" if slices > 1 else ""
            return f"evict by name: everything{sliced} ({done.keys} keys in the last)"
        name = rng.choice(readers)
        state = graph.readers[name].state
        present = sorted(state.keys(), key=repr)
        keys = None if rng.random() < 0.3 else rng.sample(present, rng.randint(1, len(present)))
        done, pinned = graph.evict_reader_keys(name, None if keys is None else [*keys, ("absent",)])
        gone = present if keys is None else keys
        assert done.keys == len(gone) - pinned and all(state.get(k) is None for k in gone), (done, gone)
        return f"evict by name: {'every key' if keys is None else keys} of reader {name}"

    # -- invariants -------------------------------------------------------------------------

    def check_graph(self) -> None:
        """The join invariant and prefix presence (Noria invariant 4), after any step."""
        self.partial.graph.check_invariants()

    def check_states(self) -> None:
        """Noria invariant 1 at quiescence: every present key of every partial state holds
        exactly what a from-scratch computation of its input gives for that key."""
        scratch: dict[int, ZSet[Row]] = {}

        def output(node: Node) -> ZSet[Row]:
            keyed = node.origin
            assert isinstance(keyed, Keyed), f"{node.describe()} has no origin"
            found = scratch.get(id(keyed))
            if found is None:
                builder = CircuitBuilder(
                    self.program.relations,
                    self.program.plan.exprs,
                    self.now,
                    hidden=self.program.plan.hidden,
                    partial=False,
                    binary_joins=self.binary_joins,
                )
                built = builder.build(keyed.expr, None)
                Circuit(built).hydrate()
                found = scratch[id(keyed)] = built.query((), [()])
            return found

        def restricted(rows: ZSet[Row], cols: tuple[int, ...]) -> dict[Key, dict[Row, int]]:
            out: dict[Key, dict[Row, int]] = {}
            for row, weight in rows.items():
                out.setdefault(project(row, cols), {})[row] = weight
            return out

        for node in self.partial.graph.nodes:
            if isinstance(node, InOrder):
                node.check_orders()  # a TopK's refills read these: each its state's rows in order
            if not node.partial:
                continue
            if isinstance(node, SourceWindow):
                # Each key's rows up to its bound (all of them when it is not cut), at least
                # `limit` of them when it is cut.
                by_key = restricted(output(node), node.key_cols)
                for key in node.state.keys():
                    rows = by_key.get(key, {})
                    bound = node.bounds.get(key)
                    want = {r: 1 for r in rows if bound is None or not bound < node.sort_key(r)}
                    assert dict(node.state.get(key) or {}) == want, f"{node.describe()} at {key!r}"
                    assert bound is None or len(want) >= node.limit, f"{node.describe()}: {key!r} short"
            elif isinstance(node, SourceIndex):
                for key in node.state.keys():
                    names = tuple(node.schema[c] for c in node.key_cols)
                    want = set(self.now(node.source, names, [key], node.filters))
                    assert set(node.state.get(key) or {}) == want, f"{node.describe()} at {key!r}"
            elif isinstance(node, TopK) and node.windowed:
                # A window: the first `limit` of the key's rows from scratch, in the view's order.
                by_key = restricted(output(node.inputs[0]), node.key_cols)
                for key in node.state.keys():
                    window = sorted(by_key.get(key, {}), key=node.sort_key)[: node.limit]
                    assert dict(node.state.get(key) or {}) == dict.fromkeys(window, 1), (
                        f"{node.describe()} at {key!r}"
                    )
            elif isinstance(node, KeyedNode) and node.inputs:
                by_key = restricted(output(node.inputs[0]), node.key_cols)
                for key in node.state.keys():
                    assert (node.state.get(key) or {}) == by_key.get(key, {}), f"{node.describe()} at {key!r}"
            elif isinstance(node, KeyedPair):
                keyed_in, other_in = node.inputs[node.keyed_side], node.inputs[1 - node.keyed_side]
                by_key = restricted(output(keyed_in), node.side_key)
                for key in node.keyed.keys():
                    assert (node.keyed.get(key) or {}) == by_key.get(key, {}), f"{node.describe()} at {key!r}"
                by_join = restricted(output(other_in), node.other_on)
                for j in node.other_keys():
                    if isinstance(node, AggregateJoin):
                        fresh = node._load(list(by_join.get(j, {}).items()))
                        assert node._value(j) == fresh.result(), f"{node.describe()} group {j!r}"
                    elif node.other_partial:
                        got = node.other.get(j) or {}  # type: ignore[attr-defined]
                        assert got == by_join.get(j, {}), f"{node.describe()} other side at {j!r}"
            else:
                # A new kind of partial state must get its check here, not pass unchecked.
                raise AssertionError(f"no invariant-1 check for the partial {node.describe()}")
