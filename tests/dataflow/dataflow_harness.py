"""Shared harness for the operator tests: an in-memory source store, a sink that
records output deltas, a driver that steps a hand-built circuit and checks it
against a from-scratch reference, and hypothesis strategies for write batches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable

from hypothesis import strategies as st

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Filters, Node, matches, project
from pomoview.dataflow.operators.source_index import SourceIndex
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet

Batch = dict[str, dict[Row, int]]  # source -> tuple -> +1 insert / -1 delete


class Store:
    """The base relations (sets), answering the circuit's fetches."""

    def __init__(self, schemas: dict[str, tuple[str, ...]]) -> None:
        self.schemas = schemas
        self.data: dict[str, set[Row]] = {name: set() for name in schemas}
        self.fetches: list[tuple[str, tuple[str, ...], list[Key]]] = []
        self.filters: list[Filters] = []  # the filters of each fetch, in order

    def fetch(
        self, source: str, names: tuple[str, ...], keys: list[Key], filters: Filters = ()
    ) -> Iterable[Row]:
        self.fetches.append((source, names, list(keys)))
        self.filters.append(filters)
        cols = tuple(self.schemas[source].index(n) for n in names)
        tests = tuple((self.schemas[source].index(a), v) for a, v in filters)
        wanted = set(keys)
        return [
            row
            for row in self.data[source]
            if project(row, cols) in wanted and matches(row, tests)
        ]

    def apply(self, batch: Batch) -> dict[str, ZSet[Row]]:
        """Applies the batch to the sets; returns the ops as ZSets for Circuit.step."""
        changes: dict[str, ZSet[Row]] = {}
        for source, ops in batch.items():
            for row, op in ops.items():
                if op > 0:
                    self.data[source].add(row)
                else:
                    self.data[source].discard(row)
            changes[source] = ZSet(ops)
        return changes

    def index(
        self,
        source: str,
        key_cols: tuple[int, ...],
        fetch_partial: bool,
        filters: Filters = (),
    ) -> SourceIndex:
        return SourceIndex(
            source, self.schemas[source], key_cols, self.fetch, partial=fetch_partial, filters=filters
        )


class Collect(Node):
    """A sink that records every delta it receives (it is not stateful: never hydrated)."""

    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))
        self.deltas: list[ZSet[Row]] = []

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        self.deltas.append(ZSet(dict(delta.items())))
        return ZSet()

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        raise AssertionError("nothing upqueries the sink")


def counter_zset(rows: Iterable[Row]) -> ZSet[Row]:
    return ZSet(Counter(rows))


class Driver:
    """Steps `top` through a circuit and checks it against `reference(store) -> ZSet`.

    Full mode: the sum of all output deltas (starting from the hydrated output)
    must equal the reference after every step. Partial mode: `key_cols` are the
    columns `top` is upqueried by; every key filled so far must hold exactly the
    reference's rows for that key, both as accumulated from the deltas and as
    `query` answers; output deltas for keys never filled must not appear.
    """

    def __init__(
        self,
        store: Store,
        top: Node,
        reference: Callable[[Store], ZSet[Row]],
        *,
        key_cols: tuple[int, ...] | None = None,
    ) -> None:
        self.store = store
        self.top = top
        self.reference = reference
        self.key_cols = key_cols
        self.sink = Collect(top)
        self.circuit = Circuit(self.sink)  # type: ignore[arg-type]
        self.circuit.hydrate()
        self.filled: dict[Key, ZSet[Row]] = {}
        self.total: ZSet[Row] = ZSet()
        if key_cols is None:
            self.total = top.query((), [()])

    @property
    def dropped(self) -> int:
        return self.circuit.metrics.dropped

    def step(self, batch: Batch) -> None:
        self.sink.deltas.clear()
        self.circuit.step(self.store.apply(batch))
        for delta in self.sink.deltas:
            if self.key_cols is None:
                self.total.extend(delta)
                continue
            for row, weight in delta.items():
                key = project(row, self.key_cols)
                if key not in self.filled:
                    # a partial state drops what it does not hold; a stateless top
                    # (filter, map, union) may pass deltas that nobody asked for
                    assert not self.top.partial, f"output delta {row}:{weight} at a missing key"
                    continue
                self.filled[key].add(row, weight)

    def fill(self, keys: list[Key]) -> ZSet[Row]:
        assert self.key_cols is not None
        answer = self.top.query(self.key_cols, keys)
        for key in keys:
            if key not in self.filled:
                self.filled[key] = answer.filter(lambda r, k=key: project(r, self.key_cols) == k)
        return answer

    def check(self) -> None:
        expected = self.reference(self.store)
        if self.key_cols is None:
            assert self.total == expected, (self.total, expected)
            assert self.top.query((), [()]) == expected
            return
        cols = self.key_cols
        for key, rows in self.filled.items():
            want = expected.filter(lambda r, k=key: project(r, cols) == k)
            assert rows == want, (key, rows, want)
            assert self.top.query(cols, [key]) == want, key


DOMAIN = 3


def rows2(domain: int = DOMAIN) -> st.SearchStrategy[Row]:
    return st.tuples(st.integers(0, domain - 1), st.integers(0, domain - 1))


def batch_for(sources: tuple[str, ...], domain: int = DOMAIN) -> st.SearchStrategy[Batch]:
    ops = st.dictionaries(rows2(domain), st.sampled_from((1, -1)), max_size=5)
    return st.fixed_dictionaries({s: ops for s in sources})


def epochs(
    sources: tuple[str, ...], domain: int = DOMAIN, max_epochs: int = 8
) -> st.SearchStrategy[list[tuple[Batch, list[Key]]]]:
    """Epochs of (write batch, keys to look up after it)."""
    keys = st.lists(st.tuples(st.integers(0, domain - 1)), max_size=2)
    return st.lists(st.tuples(batch_for(sources, domain), keys), min_size=1, max_size=max_epochs)


def touches_missing(batch: Batch, key_cols: dict[str, tuple[int, ...]], filled: Collection[Key]) -> bool:
    """Whether an operation of the batch is on a key not filled (so it must be dropped)."""
    return any(
        project(row, key_cols[source]) not in filled
        for source, ops in batch.items()
        for row in ops
        if source in key_cols
    )
