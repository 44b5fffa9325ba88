"""The node interface every PomoFlow operator implements.

A circuit moves in two directions:

* forward, `on_delta(port, delta)`: a write's delta arrives on an input port and
  the node returns its output delta. A stateful node that meets a missing key
  drops that part of the delta (and counts it): the sources keep the data.
* backward, `query(cols, keys)`: the node returns its whole current output
  restricted to rows whose `cols` values are in `keys` (an upquery). A partial
  node fills the missing keys first, asking its inputs in turn; a full node
  answers from its state; a stateless node translates the request to its inputs.
  A node writes this as its `upquery` step, which asks its inputs by yielding
  (upquery.py), so a lookup through a plan of any depth takes a few frames, and a fetch
  that is not at hand comes back as data (a Miss), not as an exception.

Both run only on the dataflow thread, between epochs, so an upquery answer is
a snapshot of the current epoch (Noria invariant 3).

The circuit drives a node through `eval(inputs, time)`: the values its input
streams carry at `time` (PomoFlow §2.7 models a stream as a cell holding its
value at the current timestamp). A value is a ZSet, an IndexedZSet or a Trace,
or None when the input emitted nothing. The default `eval` feeds the inputs to
`on_delta` one port after another, which is what every bilinear operator that
keeps its own state wants (port 0's delta meets port 1's old state, then port
1's delta meets port 0's new state).

Every node has a `kind` (§2.8: operator, child, feedback, import, sink,
source), a `local_id` (its index in its circuit) and a `global_id` (the path of
local ids from the root circuit), assigned when a circuit adopts it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, ClassVar, Literal, TypeAlias

from pomoview.dataflow.state.keyed_state import Key, KeyedState, Row
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import TraceReader
from pomoview.dataflow.upquery import Upquery, all_cover, covered, deliver_eviction, grouped, rows, run
from pomoview.dataflow.zset import IndexedZSet, ZSet

# What a stream carries at one timestamp.
Value: TypeAlias = ZSet[Any] | IndexedZSet[Any, Any] | TraceReader | tuple["Value | None", ...]
NodeKind = Literal["operator", "child", "feedback", "import", "sink", "source"]


def active(value: Value | None) -> bool:
    """Whether a stream value can change anything downstream (a trace always can)."""
    if value is None:
        return False
    if isinstance(value, (TraceReader, tuple)):
        return True
    return bool(value)

# Constant equality selections on a source: (attribute, value) pairs, all of which must
# hold (attribute == value); () selects every tuple.
Filters = tuple[tuple[str, Any], ...]

# (source name, attribute names, keys, filters) -> the source's present tuples whose
# attributes equal one of the keys and that match every filter, at the current epoch; or
# None when they are not at hand yet (a keyed Spark job must run first: the walk reports a
# Miss and asks again at its next round). An empty attribute list with the key () asks for
# the whole source (of what the filters select).
Fetch = Callable[[str, tuple[str, ...], list[Key], Filters], Iterable[Row] | None]


@dataclass(frozen=True)
class Window:
    """A fetch of each key's first `count` tuples in `order` ((attribute, descending) per
    source attribute, most significant first; total: it lists every attribute), not of
    every tuple: an ordered view's `ORDER BY ... LIMIT` pushed to the source."""

    order: tuple[tuple[str, bool], ...]
    count: int


@dataclass(frozen=True)
class WindowRows:
    """A windowed fetch's answer. `fetched`: the job's tuples of each key that has any, at
    most `count` in the window's order (a key with `count` of them may have more past the
    last). `rows`: every key's tuples as they stand now, those of the job with the
    writes logged since it ran (an insert may fall past a key's last fetched tuple: the
    caller keeps only those up to it)."""

    rows: list[Row]
    fetched: dict[Key, list[Row]]


# A Fetch with a Window: (source, attributes, keys, filters, window) -> WindowRows, or
# None when they are not at hand yet (as Fetch).
FetchWindow = Callable[[str, tuple[str, ...], list[Key], Filters, Window], WindowRows | None]


def matches(row: Row, positions: tuple[tuple[int, Any], ...]) -> bool:
    """Whether `row` holds every (column position, value) equality."""
    return all(row[i] == value for i, value in positions)


def fetch_from(
    rows: Iterable[Row],
    attributes: Sequence[str],
    names: tuple[str, ...],
    keys: Iterable[Key],
    filters: Filters,
) -> list[Row]:
    """A `Fetch`'s answer over an in-memory set of tuples with `attributes`."""
    tests = tuple((attributes.index(a), v) for a, v in filters)
    kept = [row for row in rows if matches(row, tests)]
    if not names:
        return kept
    cols = tuple(attributes.index(n) for n in names)
    wanted = set(keys)
    return [row for row in kept if project(row, cols) in wanted]


@dataclass(frozen=True)
class FetchRequest:
    """One keyed fetch a source index needs: `source`'s tuples whose `columns` equal one of
    `keys` and that match `filters`. A walk returns these as its misses."""

    source: str
    columns: tuple[str, ...]
    keys: tuple[Key, ...]
    filters: Filters = ()
    window: Window | None = None  # only the first tuples of each key (Window)


@dataclass
class Metrics:
    """A node's counters (a circuit reports their sums)."""

    dropped: int = 0  # deltas dropped at a missing key
    filled_keys: int = 0  # keys filled by upqueries
    fetches: int = 0  # fetches from the sources
    evictions: int = 0  # keys made missing again (join evictions, eviction under a budget)

    def add(self, other: Metrics) -> None:
        self.dropped += other.dropped
        self.filled_keys += other.filled_keys
        self.fetches += other.fetches
        self.evictions += other.evictions


def project(row: Row, cols: tuple[int, ...]) -> Key:
    # On every row of every step: one column indexed directly, more by a cached itemgetter
    # (a tuple of a generator cost twice as much; the applier's profile showed it).
    if len(cols) == 1:
        return (row[cols[0]],)
    getter = _GETTERS.get(cols)
    if getter is None:
        getter = _GETTERS[cols] = itemgetter(*cols) if cols else _no_columns
    return getter(row)  # type: ignore[no-any-return]


def _no_columns(row: Row) -> Key:
    return ()


# project's getters by columns (a few per program: one per distinct column tuple).
_GETTERS: dict[tuple[int, ...], Callable[[Row], Key]] = {}


def rows_by_key(rows: Iterable[tuple[Row, int]], cols: tuple[int, ...]) -> dict[Key, list[tuple[Row, int]]]:
    """A delta's weighted rows by their key on `cols`, in plain lists (an IndexedZSet builds
    a ZSet per key, a third of a join's call under a write load)."""
    items = list(rows)
    if len(cols) == 1:
        # One key column (the common case) indexed inline: `project` per row was a third of
        # the grouping of a Zipf write batch (cProfile of bench/apply_rate.py).
        (c,) = cols
        keys: list[Key] = [(row[c],) for row, _ in items]
    else:
        keys = [project(row, cols) for row, _ in items]
    out: dict[Key, list[tuple[Row, int]]] = {}
    get = out.get
    for key, item in zip(keys, items, strict=True):
        group = get(key)
        if group is None:
            out[key] = [item]
        else:
            group.append(item)
    return out


def group_by_key(
    rows: Iterable[tuple[Row, int]], cols: tuple[int, ...], keys: Collection[Key]
) -> dict[Key, list[tuple[Row, int]]]:
    """An upquery answer split by key, with an entry (maybe empty) for every asked key.

    Rows whose key was not asked for are left out: a fetch may answer a superset.
    """
    out: dict[Key, list[tuple[Row, int]]] = {k: [] for k in keys}
    for row, weight in rows:
        bucket = out.get(project(row, cols))
        if bucket is not None:
            bucket.append((row, weight))
    return out


def select_keys(rows: ZSet[Row], cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
    if not cols:
        return rows
    wanted = keys if isinstance(keys, (set, frozenset)) else set(keys)
    return rows.filter(lambda row: project(row, cols) in wanted)


# The columns of an eviction: positions in the evicting node's output, or None for "every row".
EvictCols = tuple[int, ...] | None


@dataclass
class StateSummary:
    """What Stats reports of one state: its key columns (names), mode and size."""

    key: tuple[str, ...]
    partial: bool
    present_keys: int
    rows: int
    bytes: int


def matching_keys(
    state: KeyedState, key_cols: tuple[int, ...], cols: EvictCols, keys: Collection[Key]
) -> list[Key]:
    """The present keys of `state` (keyed by `key_cols`) that rows whose `cols` values are
    among `keys` belong to. When `cols` covers the key columns those keys are derived
    without a scan; otherwise any present key could hold such a row (an empty group too,
    which a scan of the rows would miss), so every present key is taken: evicting more
    than needed is safe, evicting less is not."""
    if cols is None or not set(key_cols) <= set(cols):
        return state.keys()
    where = [cols.index(c) for c in key_cols]
    derived = {tuple(k[i] for i in where) for k in keys}
    return [k for k in derived if state.get(k) is not None]


class Node:
    """A vertex of a circuit: N inputs, one output stream.

    Eviction flows down, the opposite way of an upquery: `evict_below(cols, keys)` tells
    every consumer (`consumers`, set by the graph) that the rows of this node's output whose
    `cols` are among `keys` may be incomplete from now on. A stateless node passes the
    message on (translating columns); a partial state makes every key holding such rows
    missing and passes its own keys on (Noria invariant 4, prefix presence). A full state
    never receives one: every node above a full node is full.
    """

    kind: ClassVar[NodeKind] = "operator"
    stateful = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The drivers must stay the drivers: an override of one would call inputs directly
        # and recurse per operator again (upquery.py), or be bypassed by the steps.
        super().__init_subclass__(**kwargs)
        for driver in ("query", "query_grouped", "covers"):
            if driver in cls.__dict__:
                raise TypeError(f"{cls.__name__} overrides Node.{driver}; override its step instead")

    def __init__(self, schema: tuple[str, ...], inputs: tuple[Node, ...] = ()) -> None:
        self.schema = schema
        self.inputs = inputs
        self.metrics = Metrics()
        self.local_id = -1
        self.global_id: tuple[int, ...] = ()
        self.consumers: list[tuple[Node, int]] = []  # (consumer, the port it reads this node on)
        # What a planner built this node from (opaque here): lets tests recompute its output.
        self.origin: object = None

    def evict_below(self, cols: EvictCols, keys: Collection[Key]) -> None:
        if keys or cols is None:
            deliver_eviction(self.consumers, cols, keys)

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        """An input evicted `keys` on `cols` of its output. The default suits stateless
        nodes whose output keeps their input's columns in place (Filter, Union, Minus,
        Extend)."""
        assert not self.stateful, f"{self.describe()} keeps state but ignores evictions"
        self.evict_below(cols, keys)

    # Eviction above a key a subscription pins (eviction.py) asks first where it would reach:
    # each of these mirrors its evicting counterpart and changes nothing.

    def pinned_below(self, cols: EvictCols, keys: Collection[Key]) -> bool:
        """Whether `evict_below(cols, keys)` would reach a pinned key. Walks the consumers
        with a worklist, as `deliver_eviction` does, not a call per operator."""
        queue: deque[tuple[Node, EvictCols, Collection[Key]]] = deque([(self, cols, keys)])
        while queue:
            node, at_cols, at_keys = queue.popleft()
            if not (at_keys or at_cols is None):
                continue
            for consumer, port in node.consumers:
                step = consumer.pinned_step(port, at_cols, at_keys)
                if step is True:
                    return True
                if step is not False:
                    queue.append((consumer, *step))
        return False

    def pinned_step(
        self, port: int, cols: EvictCols, keys: Collection[Key]
    ) -> bool | tuple[EvictCols, Collection[Key]]:
        """Whether `on_evict(port, cols, keys)` reaches a pinned key here (True), stops here
        (False), or passes on to this node's consumers the eviction returned."""
        # A state that takes no evictions: as if it were reached, which must not happen.
        return True if self.stateful else (cols, keys)

    def own_eviction_reaches_pinned(self, keys: Collection[Key]) -> bool:
        """Whether `evict_own(keys)` would reach a pinned key below."""
        return True

    def state_summary(self) -> StateSummary | None:
        """The node's state for Stats (None for a stateless node)."""
        return None

    def eviction_state(self) -> KeyedState | None:
        """The partial state whose keys `evict_own` evicts (None: nothing to evict here)."""
        return None

    # -- upqueries: `query` and friends drive the step methods (`upquery`...) of upquery.py --

    def query(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row]:
        """The node's whole current output restricted to rows whose `cols` values are in
        `keys`, in one round: for full states and fetches that always answer (a miss is a
        bug here; lookups that may miss run a `Walk`). Not for overriding: a node's own
        logic is its `upquery` step."""
        answer: ZSet[Row] = run(rows(self, cols, keys))
        return answer

    def query_grouped(self, cols: tuple[int, ...], keys: Collection[Key]) -> dict[Key, Mapping[Row, int]]:
        """`query`'s answer split by key, an entry (maybe empty) per asked key."""
        answer: dict[Key, Mapping[Row, int]] = run(grouped(self, cols, keys))
        return answer

    def upquery(self, cols: tuple[int, ...], keys: Collection[Key]) -> ZSet[Row] | Upquery[ZSet[Row]]:
        """The step of `query`: the answer, or a generator that yields an `Ask` per input it
        reads (upquery.py) and returns the answer. Never call an input's step directly."""
        raise NotImplementedError

    def upquery_grouped(
        self, cols: tuple[int, ...], keys: Collection[Key]
    ) -> dict[Key, Mapping[Row, int]] | Upquery[dict[Key, Mapping[Row, int]]]:
        """The step of `query_grouped`. A node that holds its rows grouped by `cols` answers
        with its groups, building no row."""
        answer = yield rows(self, cols, keys)
        return {k: dict(rows) for k, rows in group_by_key(answer.items(), cols, keys).items()}

    def evict_own(self, keys: Collection[Key]) -> int:
        """Evicts `keys` from `eviction_state()` (memory pressure) and what below was derived
        from them (Noria invariant 4); returns how many were present."""
        raise NotImplementedError(f"{self.describe()} has no evictable state")

    def covers(self, cols: tuple[int, ...], key: Key) -> bool:
        """Whether the nearest states above hold `key` on output columns `cols` (Noria
        invariant 4, prefix presence: a key present below is present above). Not for
        overriding: a node's own logic is its `covers_step`."""
        answer: bool = run(covered(self, cols, key))
        return answer

    def covers_step(self, cols: tuple[int, ...], key: Key) -> bool | Upquery[bool]:
        """The step of `covers`. The default suits stateless nodes that keep their input's
        columns in place; a full state covers every key."""
        if self.stateful:
            return True
        return all_cover(covered(node, cols, key) for node in self.inputs)

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        """The node's output at `time`, given its inputs' values at `time`."""
        ports = [(port, value) for port, value in enumerate(inputs) if active(value)]
        if len(ports) == 1:
            # One input with a delta (most nodes have one): its output as it is, not copied.
            port, value = ports[0]
            assert isinstance(value, ZSet), f"{self.describe()} takes ZSets, got {type(value).__name__}"
            return self.on_delta(port, value)
        out: ZSet[Row] = ZSet()
        for port, value in ports:
            assert isinstance(value, ZSet), f"{self.describe()} takes ZSets, got {type(value).__name__}"
            out.extend(self.on_delta(port, value))  # a copy: an output may be a node's input
        return out

    def idle(self, inputs: Sequence[Value | None], time: Time) -> bool:
        """True when `eval` would output nothing and change nothing, so the circuit may skip it."""
        return not any(active(v) for v in inputs) and not self.busy()

    def busy(self) -> bool:
        """Whether the node will emit at the next time of its circuit even with no input (a delay)."""
        return False

    def pending(self) -> Iterable[Time]:
        """Later times of the current epoch at which the node has output due with no new input."""
        return ()

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        raise NotImplementedError

    def hydrate(self) -> list[FetchRequest]:
        """Loads a full state from the inputs; called once, inputs first. Returns the
        fetches it could not make yet (only a source index has any), leaving the state
        empty: the graph then gives up the new nodes until they are at hand."""
        return []

    @property
    def needs_hydrate(self) -> bool:
        """Whether the node keeps a full state that `hydrate` must load before the first step."""
        return self.stateful and not self.partial

    @property
    def partial(self) -> bool:
        return False

    def describe(self) -> str:
        return f"{type(self).__name__}{self.schema}"


class KeyedNode(Node):
    """A node whose one state holds its rows, keyed by the columns `key_cols`.

    Partial: keys are missing until an upquery fills them. Full: hydrated from the
    first input's whole output (subclasses with no input override `hydrate`).
    """

    stateful = True

    def __init__(
        self,
        schema: tuple[str, ...],
        inputs: tuple[Node, ...],
        key_cols: tuple[int, ...],
        *,
        partial: bool,
    ) -> None:
        super().__init__(schema, inputs)
        self.key_cols = key_cols
        self.state = KeyedState(partial=partial)

    @property
    def partial(self) -> bool:
        return self.state.partial

    def hydrate(self) -> list[FetchRequest]:
        if self.partial:
            return []
        for row, weight in self.inputs[0].query((), [()]).items():
            self.state.add(project(row, self.key_cols), row, weight)
        return []

    def on_evict(self, port: int, cols: EvictCols, keys: Collection[Key]) -> None:
        assert self.partial, f"eviction reached the full state {self.describe()}"
        evicted = [k for k in matching_keys(self.state, self.key_cols, cols, keys) if self.state.evict(k)]
        self.metrics.evictions += len(evicted)
        self.keys_evicted(evicted)
        self.evict_below(self.key_cols, evicted)

    def keys_evicted(self, keys: Sequence[Key]) -> None:
        """Called with the keys this state just evicted: for what a subclass keeps per key
        beside the state (operators/in_order.py)."""

    def eviction_state(self) -> KeyedState | None:
        return self.state if self.partial else None

    def pinned_step(
        self, port: int, cols: EvictCols, keys: Collection[Key]
    ) -> bool | tuple[EvictCols, Collection[Key]]:
        if not self.partial:
            return True
        found = matching_keys(self.state, self.key_cols, cols, keys)
        pinned = self.state.pinned
        return True if any(k in pinned for k in found) else (self.key_cols, found)

    def own_eviction_reaches_pinned(self, keys: Collection[Key]) -> bool:
        return self.pinned_below(self.key_cols, [k for k in keys if self.state.is_present(k)])

    def evict_own(self, keys: Collection[Key]) -> int:
        assert self.partial, f"eviction reached the full state {self.describe()}"
        evicted = [k for k in keys if self.state.evict(k)]
        self.metrics.evictions += len(evicted)
        self.keys_evicted(evicted)
        self.evict_below(self.key_cols, evicted)
        return len(evicted)

    def covers_step(self, cols: tuple[int, ...], key: Key) -> bool:
        if not self.partial or not set(self.key_cols) <= set(cols):
            return True
        return self.state.get(tuple(key[cols.index(c)] for c in self.key_cols)) is not None

    def describe(self) -> str:
        keys = tuple(self.schema[c] for c in self.key_cols)
        return f"{type(self).__name__}{self.schema} by {keys}, {'partial' if self.partial else 'full'}"

    def state_summary(self) -> StateSummary:
        return StateSummary(
            tuple(self.schema[c] for c in self.key_cols),
            self.partial,
            self.state.present_keys(),
            self.state.row_count(),
            self.state.estimate_bytes(),
        )
