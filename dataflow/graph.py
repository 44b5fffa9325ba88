"""Graph: one dataflow graph per program, shared by all of its readers (DESIGN §3).

Readers (one per view and key attributes) are added lazily, at their first lookup. A
reader's builder reuses every node it can (one state per operator and key columns), so a
second view over a common sub-plan adds only its reader and the states it lacks. Adding a
reader orders the whole graph again (the root Circuit), links every node to its consumers
(evictions flow along those links) and hydrates the new full states. Adding is all or
nothing: if a new full state cannot be hydrated yet (its source's fetch is not at hand), the
graph is unchanged, `add` returns the fetches it needs, and the caller discards the new nodes
and builds them again once those are at hand.

Everything here runs on one thread at a time (the server's dataflow lock).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.introspect import NodeInfo
from pomoview.dataflow.node import Fetch, FetchRequest, FetchWindow, KeyedNode, Metrics, Node, Value
from pomoview.dataflow.operators.child import Child
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.source_slice import SourceSlice
from pomoview.dataflow.state.eviction import Evicted, evict, evict_all, partial_state_bytes
from pomoview.dataflow.state.keyed_pair import KeyedPair
from pomoview.dataflow.state.keyed_state import Key, KeyedState, Row, evictions
from pomoview.dataflow.zset import ZSet

# A reader's name, of the caller's choosing (the planner's: the view and its key attributes).
ReaderName = TypeVar("ReaderName", bound=Hashable)


def _keyed_alike_above(reader: Reader) -> list[KeyedState]:
    """The partial states above `reader` keyed by as many columns: a read of a reader key
    marks the same key there as used (a key of another meaning is rarely present, and a
    mark only delays its eviction by one sweep)."""
    width = len(reader.key_cols)
    out: list[KeyedState] = []
    seen: set[int] = set()
    stack = list(reader.inputs)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.inputs)
        state = node.eviction_state()
        summary = node.state_summary()
        if state is not None and summary is not None and len(summary.key) == width:
            out.append(state)
    return out


class Graph(Generic[ReaderName]):
    def __init__(self) -> None:
        self.readers: dict[ReaderName, Reader] = {}
        self.circuit = Circuit(())
        self._names: dict[int, str] = {}  # id(node) -> its stable id ("n7"), for nodes in the graph
        self._views: dict[ReaderName, str] = {}  # reader -> the view it answers
        self._slices: list[SourceSlice] = []
        # Gates a step left with pinned keys unsettled, by id (`take_unsettled`).
        self._unsettled: dict[int, DemandGate] = {}

    @property
    def nodes(self) -> list[Node]:
        return self.circuit.nodes

    @property
    def epoch(self) -> int:
        return self.circuit.epoch

    @property
    def metrics(self) -> Metrics:
        return self.circuit.metrics

    def add(self, name: ReaderName, view: str, reader: Reader, fetch: Fetch) -> list[FetchRequest]:
        """Adds `reader` (and the new nodes above it); see the module docstring. Returns the
        fetches the new full states need first (and then adds nothing)."""
        assert name not in self.readers
        circuit = Circuit([*self.readers.values(), reader])
        circuit.epoch = self.circuit.epoch
        circuit.set_fetch(fetch)
        fresh = [node for node in circuit.nodes if id(node) not in self._names]
        # The new full source indexes first (they read no node): every fetch they lack is
        # named in one round. Then the others, inputs first, each reading hydrated inputs.
        sources = [n for n in fresh if isinstance(n, SourceIndex) and n.needs_hydrate]
        misses = [m for node in sources for m in node.hydrate()]
        if misses:
            return misses
        for node in fresh:
            if node.needs_hydrate and not isinstance(node, SourceIndex):
                left = node.hydrate()
                assert not left, f"{node.describe()} missed {left} though its sources are hydrated"
        circuit.hydrated = True
        for node in fresh:
            self._names[id(node)] = f"n{len(self._names)}"
        circuit.link()
        self.circuit = circuit
        self.readers[name] = reader
        self._views[name] = view
        self._slices = circuit.slices
        reader.upstream = _keyed_alike_above(reader)
        return []

    def loaded_keys_needed(self, source: str) -> list[tuple[int, ...]] | None:
        """The key columns of the source indexes of `source` (what `evict_loaded` needs of a
        load's rows), or None when one of them is full (a load rebuilds the graph then)."""
        needed: list[tuple[int, ...]] = []
        for node in self.circuit.sources.get(source, ()):
            if isinstance(node, SourceIndex):
                if not node.partial:
                    return None
                if node.source_key_cols not in needed:
                    needed.append(node.source_key_cols)
        return needed

    def evict_loaded(self, source: str, touched: Mapping[tuple[int, ...], Collection[Key]]) -> bool:
        """After a bulk load into `source` (rows that never passed through the circuit):
        evicts, at every source index of `source`, the present keys the load touched
        (`touched`: key columns -> the loaded tuples' keys on them), and what below was
        derived from them; the next reads refill them from the store. False, evicting
        nothing, when that cannot keep every state right: a full index (its whole contents
        would need the load's rows), an index whose key columns `touched` lacks, or a touched
        key a subscription pins (it would miss the change); the caller then rebuilds."""
        nodes = [n for n in self.circuit.sources.get(source, ()) if isinstance(n, SourceIndex)]
        plan: list[tuple[SourceIndex, list[Key]]] = []
        for node in nodes:
            keys = touched.get(node.source_key_cols)
            if not node.partial or keys is None:
                return False
            present = [k for k in keys if node.state.is_present(k)]
            if any(k in node.state.pinned for k in present) or node.own_eviction_reaches_pinned(present):
                return False
            plan.append((node, present))
        for node, present in plan:
            if present:
                node.evict_own(present)
        self.release_demand()
        return True

    def evict(self, need: int) -> Evicted:
        """Evicts about `need` bytes of partial state, least recently used keys of the
        largest states first (eviction.py)."""
        evicted = evict(self.nodes, need)
        self.release_demand()
        return evicted

    def evict_everything(self, max_keys: int | None = None) -> Evicted:
        """Evicts every unpinned key of every partial state (eviction.py's `evict_all`; with
        `max_keys`, a slice of at most that many), and retracts the demand no state below
        holds any more."""
        evicted = evict_all(self.nodes, max_keys)
        self.release_demand()
        return evicted

    def evict_reader_keys(self, name: ReaderName, keys: Collection[Key] | None) -> tuple[Evicted, int]:
        """Evicts `keys` (None: every key) from reader `name` where present and not pinned by
        a subscription, and retracts the demand no state below holds any more; returns what
        it evicted and how many of the keys it left because they are pinned. The states
        above keep their keys (other readers may read them). A full reader evicts nothing:
        it answers a key it does not hold as empty, so dropping one would change answers."""
        reader = self.readers[name]
        state = reader.state
        if not reader.partial:
            return Evicted(), 0
        present = state.keys() if keys is None else [k for k in dict.fromkeys(keys) if state.is_present(k)]
        victims = [k for k in present if k not in state.pinned]
        before = self.partial_bytes()
        count = reader.evict_own(victims) if victims else 0
        self.release_demand()
        pinned = len(present) - len(victims)
        return Evicted(count, max(0, before - self.partial_bytes()), 1 if count else 0), pinned

    def release_demand(self) -> int:
        """Retracts the demand of the keys evicted below every DemandGate (one step each
        that has some); returns how many keys it retracted."""
        return sum(node.release() for node in self.nodes if isinstance(node, DemandGate))

    def partial_bytes(self) -> int:
        return partial_state_bytes(self.nodes)

    def set_fetch(self, fetch: Fetch, fetch_window: FetchWindow | None = None) -> None:
        self.circuit.set_fetch(fetch, fetch_window)

    def step(self, changes: Mapping[str, ZSet[Row]]) -> dict[int, Value | None]:
        """One epoch's changes of the sources. The slices of demanded relations
        (source_slice.py) take their part of their base sources' changes; a slice the step
        made need keys it has not fetched evicts its gates' keys, whose answers would lack
        those keys' rows (the next lookups fetch them: `DemandGate.evict_settled`)."""
        slices = self._slices
        if not slices:
            return self.circuit.step(changes)
        parts = dict(changes)
        for piece in slices:
            piece.grew = False
            delta = changes.get(piece.source)
            if delta:
                part = piece.forward(delta)
                if part:
                    parts[piece.relation] = part
        out = self.circuit.step(parts)
        gates = {id(g): g for piece in slices if piece.grew for g in piece.gates}
        for gate in gates.values():
            assert isinstance(gate, DemandGate)
            _, pinned = gate.evict_settled()
            if pinned:
                self._unsettled[id(gate)] = gate
        return out

    def take_unsettled(self) -> list[DemandGate]:
        """The gates whose slices steps since the last call left unmet under keys pinned by
        subscriptions: to settle (`DemandGate.settle_step`) outside the step."""
        gates = list(self._unsettled.values())
        self._unsettled.clear()
        return gates

    def step_demand(self, changes: Mapping[str, ZSet[Row]]) -> None:
        """A step of demand sources and slices only (a lookup's demand, a slice's fetched
        rows, a release), between epochs: no base source changes, so no slice forwards."""
        self.circuit.step(changes)

    def open_step(self) -> None:
        """Readers keep their published versions until `publish` (reads without a lock go
        on at the last published epoch while steps run: operators/reader.py)."""
        for reader in self.readers.values():
            reader.open_step()

    def publish(self) -> None:
        for reader in self.readers.values():
            reader.publish()

    @property
    def token(self) -> Hashable:
        """Changes whenever an answer a walk holds across rounds may have gone stale: at
        every step (an epoch's changes) and at every eviction anywhere (upquery.py)."""
        return (self.circuit.epoch, evictions())

    def lookup(self, name: ReaderName, keys: Sequence[Key]) -> list[list[Row]]:
        """The reader's rows for each key, filling the missing keys in one round (for a
        fetch that always answers)."""
        return self.readers[name].lookup(keys)

    # -- introspection and invariants ------------------------------------------------------

    def views_of(self) -> dict[int, list[str]]:
        """id(node) -> the views whose readers depend on it."""
        out: dict[int, list[str]] = {}
        for name, reader in self.readers.items():
            view = self._views[name]
            stack: list[Node] = [reader]
            seen: set[int] = set()
            while stack:
                node = stack.pop()
                if id(node) in seen:
                    continue
                seen.add(id(node))
                views = out.setdefault(id(node), [])
                if view not in views:
                    views.append(view)
                stack.extend(node.inputs)
        return out

    def below(self, sources: Collection[str]) -> set[str]:
        """The ids of the nodes that read any of `sources`, directly or through others."""
        stack: list[Node] = [n for source in sources for n in self.circuit.sources.get(source, ())]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) not in seen:
                seen.add(id(node))
                stack.extend(consumer for consumer, _ in node.consumers)
        return {self._names[i] for i in seen if i in self._names}

    def node_infos(self, view: str | None = None) -> list[NodeInfo]:
        """One NodeInfo per node, inputs first (only `view`'s nodes when given)."""
        views = self.views_of()
        out: list[NodeInfo] = []
        for node in self.nodes:
            node_views = views.get(id(node), [])
            if view is not None and view not in node_views:
                continue
            summary = node.state_summary()
            info = NodeInfo(
                id=self._names[id(node)],
                operator=type(node).__name__,
                detail=node.describe(),
                inputs=[self._names[id(p)] for p in node.inputs if id(p) in self._names],
                stateful=node.stateful,
                dropped=node.metrics.dropped,
                upqueries=node.metrics.filled_keys,
                evictions=node.metrics.evictions,
                views=sorted(node_views),
            )
            if summary is None:
                info.unmeasured = node.stateful
            else:
                info.key = list(summary.key)
                info.partial = summary.partial
                info.present_keys = summary.present_keys
                info.rows = summary.rows
                info.bytes = summary.bytes
            out.append(info)
        return out

    def check_invariants(self) -> None:
        """Asserts what the graph can check of itself after any step: each join's present
        keyed rows have their join keys present on the other side (KeyedPair.check), and
        prefix presence (Noria invariant 4): every present key of a partial state is present
        in the nearest states above it on its path."""
        for node in self.nodes:
            if isinstance(node, KeyedPair | DemandGate):
                node.check()
            elif isinstance(node, KeyedNode):
                node.state.check()
            elif isinstance(node, Child):
                for output in node.totals:
                    output.check()
            if isinstance(node, KeyedNode) and node.partial and node.inputs:
                for key in node.state.keys():
                    assert node.inputs[0].covers(node.key_cols, key), (
                        f"{node.describe()}: {key!r} is present here but missing above"
                    )
