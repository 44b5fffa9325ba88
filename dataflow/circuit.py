"""Circuit (PomoFlow §2.6–2.8): nodes evaluated in topological order, one timestamp at a time.

A circuit is built from its sinks: every node they read from, transitively,
belongs to it, and so does the node each Feedback delays (a feedback edge is
temporal, so it is left out of the topological order, §2.8.3). When a circuit
adopts its nodes it numbers them: `local_id` is the index in topological order
and `global_id` the path of local ids from the root, through Child nodes.

The root circuit runs one epoch per `step(changes)`: its time is `(epoch,)`,
its sources take the epoch's changes, and one pass in topological order
reaches the epoch's fixed point. A Child node (`operators/child.py`) runs its
own circuit at times `(epoch, iteration)` until that circuit is at rest.

`lookup(keys)` answers from the reader, upquerying the keys it misses first.
Both must be called from one thread at a time (the server's dataflow thread),
which is what makes every upquery answer a snapshot of the epoch it runs in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pomoview.dataflow.node import Fetch, FetchWindow, Metrics, Node, Value, active
from pomoview.dataflow.operators.feedback import Feedback
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.operators.source_slice import SourceSlice
from pomoview.dataflow.operators.source_window import SourceWindow
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet


def topological_order(sinks: Sequence[Node]) -> list[Node]:
    """Every node the sinks depend on, inputs first; a Feedback's delayed node joins as a root."""
    order: list[Node] = []
    seen: set[int] = set()
    roots = list(sinks)
    while roots:
        stack: list[tuple[Node, bool]] = [(roots.pop(), False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            if isinstance(node, Feedback):
                assert node.delayed is not None, f"{node.describe()} was never connected"
                roots.append(node.delayed)
            for parent in reversed(node.inputs):
                if id(parent) not in seen:
                    stack.append((parent, False))
    return order


class Circuit:
    def __init__(self, sinks: Node | Sequence[Node]) -> None:
        self.sinks: tuple[Node, ...] = (sinks,) if isinstance(sinks, Node) else tuple(sinks)
        self.nodes = topological_order(list(reversed(self.sinks)))
        self.assign_ids(())
        self.sources: dict[str, list[Node]] = {}
        for node in self.nodes:
            if isinstance(node, (SourceIndex, Input)):
                self.sources.setdefault(node.source, []).append(node)
        self.feedbacks = [n for n in self.nodes if isinstance(n, Feedback)]
        self.slices = [n for n in self.nodes if isinstance(n, SourceSlice)]
        self._orders: dict[frozenset[int], list[Node]] = {}  # see `reached`
        self.epoch = 0
        self.hydrated = False

    def assign_ids(self, prefix: tuple[int, ...]) -> None:
        """Numbers the nodes under `prefix`; nested circuits are numbered under their Child's id."""
        for index, node in enumerate(self.nodes):
            node.local_id = index
            node.global_id = prefix + (index,)
            inner = getattr(node, "circuit", None)
            if isinstance(inner, Circuit):
                inner.assign_ids(node.global_id)

    @property
    def metrics(self) -> Metrics:
        """The sums of every node's counters, nested circuits included."""
        total = Metrics()
        for node in self.nodes:
            total.add(node.metrics)
            inner = getattr(node, "circuit", None)
            if isinstance(inner, Circuit):
                total.add(inner.metrics)
        return total

    @property
    def reader(self) -> Reader:
        reader = self.sinks[0]
        assert isinstance(reader, Reader), "this circuit has no reader"
        return reader

    def set_fetch(self, fetch: Fetch, fetch_window: FetchWindow | None = None) -> None:
        """Points every source index and slice at `fetch`, and every source window at
        `fetch_window` (the scheduler passes them per lookup; without one, a window fetches
        its keys whole and cuts them itself)."""
        for nodes in self.sources.values():
            for node in nodes:
                if isinstance(node, SourceIndex):
                    node.fetch = fetch
                if isinstance(node, SourceWindow):
                    node.fetch_window = fetch_window
        for piece in self.slices:
            piece.fetch = fetch

    def hydrate(self) -> None:
        """Loads every full state (inputs come first, so each reads hydrated inputs), then
        links every node to its consumers."""
        for node in self.nodes:
            if node.needs_hydrate:
                left = node.hydrate()
                assert not left, f"{node.describe()} missed {left}: hydrate from fetches that answer"
        self.hydrated = True
        self.link()

    def link(self) -> None:
        """Points every node at the nodes that read it (`Node.consumers`): evictions travel
        along these links. Done once the circuit is complete, so that a circuit given up
        halfway (a hydration that could not finish) leaves its inputs' links as they were."""
        for node in self.nodes:
            node.consumers = []
        for node in self.nodes:
            for port, parent in enumerate(node.inputs):
                parent.consumers.append((node, port))

    def evaluate(self, time: Time, external: Mapping[int, Value | None]) -> dict[int, Value | None]:
        """One pass in topological order at `time`; sources and imports read `external` by node id.

        Returns each node's output (absent when the node was idle), and latches every
        feedback's input for the next time.
        """
        values: dict[int, Value | None] = {}
        for node in self.reached(external):
            if node.kind in ("source", "import"):
                inputs: list[Value | None] = [external.get(id(node))]
            else:
                inputs = [values.get(id(parent)) for parent in node.inputs]
            if node.idle(inputs, time):
                continue
            values[id(node)] = node.eval(inputs, time)
        for feedback in self.feedbacks:
            assert feedback.delayed is not None
            feedback.latch(values.get(id(feedback.delayed)))
        return values

    def reached(self, external: Mapping[int, Value | None]) -> list[Node]:
        """The nodes a pass with `external` may change, in topological order: those below a
        source or import that has a value, and those below a node that may emit with no
        input (a node whose `idle` or `busy` is its own: feedbacks, delays, nested
        circuits). Every other node would be idle; a step of one source does not even visit
        the nodes of the others. Cached per set of sources, for the circuit's life."""
        starts = frozenset(k for k, v in external.items() if active(v))
        order = self._orders.get(starts)
        if order is None:
            reached = set(starts)
            for node in self.nodes:
                kind = type(node)
                if (
                    kind.idle is not Node.idle
                    or kind.busy is not Node.busy
                    or any(id(parent) in reached for parent in node.inputs)
                ):
                    reached.add(id(node))
            order = self._orders[starts] = [n for n in self.nodes if id(n) in reached]
        return order

    def step(self, changes: Mapping[str, ZSet[Row]]) -> dict[int, Value | None]:
        """Runs the next epoch: `changes` maps a source to its epoch's delta (or operations)."""
        # A full source index must be loaded before the first epoch, or its deltas would be wrong.
        assert self.hydrated or not any(
            isinstance(n, SourceIndex) and not n.partial for n in self.nodes
        ), "hydrate the circuit before stepping it"
        self.epoch += 1
        external: dict[int, Value | None] = {}
        for source, delta in changes.items():
            for node in self.sources.get(source, ()):
                if delta:
                    external[id(node)] = delta
        return self.evaluate((self.epoch,), external)

    def lookup(self, keys: Sequence[Key]) -> list[list[Row]]:
        """The reader's rows for each key, filling the missing keys with one upquery."""
        return self.reader.lookup(keys)

    def relations(self) -> Iterable[str]:
        return self.sources.keys()

    def explain(self) -> str:
        lines: list[str] = []
        for node in self.nodes:
            path = ".".join(map(str, node.global_id))
            lines.append(f"{path}: {node.describe()}")
            inner = getattr(node, "circuit", None)
            if isinstance(inner, Circuit):
                lines.extend("  " + line for line in inner.explain().splitlines())
        return "\n".join(lines)
