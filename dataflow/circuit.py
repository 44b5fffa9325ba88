"""Circuit: a DAG of nodes ending in one reader, stepped one epoch at a time.

`step(changes)` pushes one epoch's source operations through the nodes in
topological order; `lookup(keys)` answers from the reader, upquerying the
keys it misses first. Both must be called from one thread at a time (the
server's dataflow thread), which is what makes every upquery answer a snapshot
of the epoch it runs in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .keyed_state import Key, Row
from .node import Fetch, Metrics, Node
from .operators.reader import Reader
from .operators.source_index import SourceIndex
from .zset import ZSet


def topological_order(sink: Node) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(sink, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for parent in reversed(node.inputs):
            if id(parent) not in seen:
                stack.append((parent, False))
    return order


class Circuit:
    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.nodes = topological_order(reader)
        self.metrics = Metrics()
        for node in self.nodes:
            node.metrics = self.metrics
        self.children: dict[int, list[tuple[Node, int]]] = {id(n): [] for n in self.nodes}
        for node in self.nodes:
            for port, parent in enumerate(node.inputs):
                self.children[id(parent)].append((node, port))
        self.sources: dict[str, list[SourceIndex]] = {}
        for node in self.nodes:
            if isinstance(node, SourceIndex):
                self.sources.setdefault(node.source, []).append(node)

        self.hydrated = False

    def set_fetch(self, fetch: Fetch) -> None:
        """Points every source index at `fetch` (the scheduler passes one per lookup)."""
        for indexes in self.sources.values():
            for index in indexes:
                index.fetch = fetch

    def hydrate(self) -> None:
        """Loads every full state; inputs come first, so each reads hydrated inputs."""
        for node in self.nodes:
            if node.stateful and not node.partial:
                node.hydrate()
        self.hydrated = True

    def step(self, changes: Mapping[str, ZSet[Row]]) -> None:
        """Applies one epoch: `changes` maps a source to its operations (+1 insert, -1 delete)."""
        assert self.hydrated
        pending: dict[int, list[tuple[int, ZSet[Row]]]] = {}
        for source, ops in changes.items():
            for index in self.sources.get(source, ()):
                if ops:
                    pending.setdefault(id(index), []).append((-1, ops))
        for node in self.nodes:
            inbox = pending.pop(id(node), None)
            if not inbox:
                continue
            out: ZSet[Row] = ZSet()
            for port, delta in sorted(inbox, key=lambda item: item[0]):
                out.extend(node.on_delta(max(port, 0), delta))
            if not out:
                continue
            for child, port in self.children[id(node)]:
                pending.setdefault(id(child), []).append((port, out))

    def lookup(self, keys: Sequence[Key]) -> list[list[Row]]:
        """The reader's rows for each key, filling the missing keys with one upquery."""
        missing = self.reader.missing(keys)
        if missing:
            self.reader.fill(missing)
        results: list[list[Row]] = []
        for key in keys:
            rows = self.reader.read(key)
            assert rows is not None
            results.append(rows)
        return results

    def relations(self) -> Iterable[str]:
        return self.sources.keys()

    def explain(self) -> str:
        return "\n".join(f"{i}: {n.describe()}" for i, n in enumerate(self.nodes))
