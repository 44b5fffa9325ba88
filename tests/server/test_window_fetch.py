"""`SourceStore.fetch_window`: each key's first `count` present tuples in an order, found in
the keyed Spark job (presence, then a number per key), against a plain Python model of the
operations: the latest operation of each tuple (the largest (epoch, op), an insert winning a
tie), the present tuples grouped by key, sorted by Python's `sorted` with the descending
attributes reversed, cut to `count`.

The store is built in stages so that every way of reading a part runs: loads alone (inserts
only, repeats: the bare path), flushes with deletes, re-inserts, a tuple inserted twice and an
insert and a delete of one tuple at one epoch (the stamped path), a compaction alone (bare
again), and flushes after it that delete and re-insert compacted tuples (compacted parts'
literal stamps beside real ones)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pomoview.server.store.sessions import PUSH_LIMIT
from pomoview.server.store.source_store import SourceStore
from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_, Value

SCHEMA: SourceSchema = (("k", "int"), ("created", "int"), ("name", "string"), ("flag", "bool"))
NAMES = [a for a, _ in SCHEMA]
# Code points whose order differs from UTF-16's (an astral character after U+FF5E), a prefix,
# the empty string, upper case before lower: Python's order must be Spark's (UTF-8 bytes).
WORDS = ["", "a", "ab", "B", "é", "\uff5e", "\U0001f600", "z"]
KEYS = range(5)  # keys 5 and 6 never have a row
# Total orders (every attribute, the order's own first), ascending and descending mixed.
ORDERS: list[list[tuple[str, bool]]] = [
    [("created", True), ("name", False), ("flag", False), ("k", False)],
    [("name", True), ("created", False), ("flag", True), ("k", True)],
    [("flag", True), ("name", False), ("created", True), ("k", False)],
    [("k", False), ("created", False), ("name", True), ("flag", False)],
]
BIG = 1000  # more than any key has


class Model:
    """The latest (epoch, op) of every tuple ever written; present: those whose op inserts."""

    def __init__(self) -> None:
        self.latest: dict[Tuple_, tuple[int, int]] = {}

    def write(self, epoch: int, inserts: Sequence[Tuple_], deletes: Sequence[Tuple_] = ()) -> None:
        for op, tuples in ((1, inserts), (-1, deletes)):
            for t in tuples:
                self.latest[t] = max(self.latest.get(t, (0, -1)), (epoch, op))

    def present(self) -> list[Tuple_]:
        return [t for t, (_, op) in self.latest.items() if op == 1]

    def window(
        self,
        columns: Sequence[str],
        keys: Sequence[Tuple_],
        filters: Mapping[str, Value],
        order: Sequence[tuple[str, bool]],
        count: int,
    ) -> dict[Tuple_, list[Tuple_]]:
        """Each key's first `count` present tuples (that match `filters`) in `order`."""
        wanted = set(keys)
        by_key: dict[Tuple_, list[Tuple_]] = {}
        for t in self.present():
            key = tuple(t[NAMES.index(c)] for c in columns)
            if key in wanted and all(t[NAMES.index(a)] == v for a, v in filters.items()):
                by_key.setdefault(key, []).append(t)
        return {key: in_order(tuples, order)[:count] for key, tuples in by_key.items()}


def in_order(tuples: list[Tuple_], order: Sequence[tuple[str, bool]]) -> list[Tuple_]:
    """`tuples` in `order` by Python's `sorted`: stable sorts, least significant first."""
    out = list(tuples)
    for a, descending in reversed(order):
        i = NAMES.index(a)
        out.sort(key=lambda t: t[i], reverse=descending)  # noqa: B023 (used at once)
    return out


def by_key(columns: Sequence[str], tuples: list[Tuple_]) -> dict[Tuple_, list[Tuple_]]:
    """The store's answer grouped by key, each key's tuples in the answer's order; checks
    that a key's tuples come together."""
    out: dict[Tuple_, list[Tuple_]] = {}
    previous: Tuple_ | None = None
    for t in tuples:
        key = tuple(t[NAMES.index(c)] for c in columns)
        assert key == previous or key not in out, f"the tuples of key {key} are not together: {tuples}"
        out.setdefault(key, []).append(t)
        previous = key
    return out


def random_tuple(rng: random.Random) -> Tuple_:
    # Key 0 is hot: more tuples than the small windows hold.
    k = 0 if rng.random() < 0.4 else rng.choice(KEYS)
    return (k, rng.randrange(6), rng.choice(WORDS), rng.random() < 0.5)


def new_store(root: Path, spark: SparkSession) -> SourceStore:
    # Small buckets: each part has several, and a keyed fetch reads its keys' only.
    store = SourceStore(str(root), lambda: spark, buckets=4, rows_per_bucket=3)
    store.ensure_source("s", SCHEMA)
    store.cluster_by("s", ["k"])
    return store


def load(store: SourceStore, spark: SparkSession, model: Model, epoch: int, rows: list[Tuple_]) -> None:
    df = spark.createDataFrame(rows, "k long, created long, name string, flag boolean")
    store.load("s", df, epoch)
    model.write(epoch, rows)


def flush(store: SourceStore, model: Model, rng: random.Random, epoch: int) -> None:
    """One flushed batch: new tuples, one of them twice; deletes of present tuples (some
    never inserted, too); re-inserts of deleted ones; a tuple inserted and deleted at once."""
    present = sorted(model.present(), key=repr)
    gone = sorted((t for t, (_, op) in model.latest.items() if op == -1), key=repr)
    inserts = [random_tuple(rng) for _ in range(25)]
    inserts.append(inserts[0])
    inserts += rng.sample(gone, min(len(gone), 4))
    deletes = rng.sample(present, min(len(present), 12)) + [random_tuple(rng)]
    both = random_tuple(rng)  # an insert and a delete at one epoch: the insert wins
    inserts.append(both)
    deletes.append(both)
    deletes = [t for t in deletes if t not in inserts or t == both]
    store.flush([LoggedBatch(epoch, {"s": SourceChange(tuple(inserts), tuple(deletes))})])
    model.write(epoch, inserts, deletes)


@pytest.fixture
def stamps_asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[SourceStore], list[bool]]]:
    """The `stamps` of each `operations` call of a store's fetches (True: the stamped path)."""
    asked: list[bool] = []

    def spy(store: SourceStore) -> list[bool]:
        reads = store._reads  # the store's fetcher
        operations = reads.operations

        def spied(*args: Any, **kwargs: Any) -> Any:
            asked.append(kwargs.get("stamps", True))
            return operations(*args, **kwargs)

        monkeypatch.setattr(reads, "operations", spied)
        return asked

    yield spy


def check(
    store: SourceStore,
    model: Model,
    columns: Sequence[str],
    keys: Sequence[Tuple_],
    order: Sequence[tuple[str, bool]],
    count: int,
    filters: Mapping[str, Value] | None = None,
) -> dict[Tuple_, list[Tuple_]]:
    """fetch_window's answer equals the model's, each key's tuples in order; returns it."""
    with store.pinned() as pin:
        version, tuples = store.fetch_window("s", columns, keys, filters, order, count, at=pin)
    assert version == store.version
    got = by_key(columns, tuples)
    expected = model.window(columns, keys, filters or {}, order, count)
    assert got == expected, f"columns {columns}, order {order}, count {count}, filters {filters}"
    return got


def check_stage(store: SourceStore, model: Model, stage: int) -> None:
    """Every order by the key `k` (all keys, absent ones too), and one by the hot key alone,
    one by two columns and one of the whole source; the counts (1, 3, more than a key has)
    turn with `stage`, so that over three stages each order meets each count."""
    keys = [(k,) for k in range(7)]
    for i, order in enumerate(ORDERS):
        got = check(store, model, ("k",), keys, order, [1, 3, BIG][(i + stage) % 3])
        assert (5,) not in got and (6,) not in got
    counts = [1, 3, BIG]
    # One key: a top-k, not a number per key.
    check(store, model, ("k",), [(0,)], ORDERS[(stage + 2) % 4], counts[(stage + 2) % 3])
    pairs = [(0, True), (0, False), (3, True), (6, True)]
    check(store, model, ("k", "flag"), pairs, ORDERS[stage % 4], counts[stage % 3])
    check(store, model, (), [()], ORDERS[(stage + 1) % 4], counts[(stage + 1) % 3])


def test_windows_match_the_model_through_loads_flushes_and_a_compaction(
    tmp_path: Path, spark: SparkSession, stamps_asked: Callable[[SourceStore], list[bool]]
) -> None:
    rng = random.Random(20250214)
    store = new_store(tmp_path, spark)
    asked = stamps_asked(store)
    model = Model()

    # Two loads, with repeats within and across them: inserts only, the bare path.
    first = [random_tuple(rng) for _ in range(120)]
    load(store, spark, model, 1, first + first[:10])
    load(store, spark, model, 2, [random_tuple(rng) for _ in range(60)] + first[20:40])
    assert any(len(ts) > 3 for ts in model.window(("k",), [(0,)], {}, ORDERS[0], BIG).values())
    check_stage(store, model, 0)
    assert not any(asked), "loaded parts alone: no stamps read"

    # Flushes with deletes: the stamped path.
    for epoch in (3, 4, 5):
        flush(store, model, rng, epoch)
    asked.clear()
    check_stage(store, model, 1)
    assert all(asked)

    # Compacted alone: inserts only again.
    assert store.compact("s")
    asked.clear()
    check_stage(store, model, 2)
    assert not any(asked)

    # Flushes after the compaction: its literal stamps beside the flushes' own.
    for epoch in (6, 7):
        flush(store, model, rng, epoch)
    asked.clear()
    check_stage(store, model, 3)
    assert all(asked)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession) -> tuple[SourceStore, Model]:
    """A store with a load, a compaction and flushes after it, and its model."""
    rng = random.Random(7)
    store = new_store(tmp_path_factory.mktemp("window"), spark)
    model = Model()
    load(store, spark, model, 1, [random_tuple(rng) for _ in range(150)])
    flush(store, model, rng, 2)
    assert store.compact("s")
    flush(store, model, rng, 3)
    flush(store, model, rng, 4)
    return store, model


def test_filters_apply_before_the_window(built: tuple[SourceStore, Model]) -> None:
    store, model = built
    keys = [(k,) for k in range(7)]
    got = check(store, model, ("k",), keys, ORDERS[0], 2, {"flag": True})
    assert got and all(t[3] is True for ts in got.values() for t in ts)
    check(store, model, ("k",), keys, ORDERS[1], 3, {"name": "é", "flag": False})
    check(store, model, ("k",), keys, ORDERS[2], 1, {"k": 0})  # on the key column itself
    check(store, model, (), [()], ORDERS[3], 4, {"created": 2})
    assert check(store, model, ("k",), keys, ORDERS[0], 2, {"name": "never"}) == {}


def test_keys_with_no_rows_and_many_keys(built: tuple[SourceStore, Model]) -> None:
    store, model = built
    with store.pinned() as pin:
        assert store.fetch_window("s", ("k",), [(5,), (6,), (-1,)], None, ORDERS[0], 3, at=pin) == (
            store.version,
            [],
        )
        assert store.fetch_window("s", ("k",), [], None, ORDERS[0], 3, at=pin) == (store.version, [])
    # Beyond the IN list's limit: the keys are a broadcast semi-join.
    many = [(k,) for k in range(-200, 200)]
    assert len(many) > PUSH_LIMIT
    got = check(store, model, ("k",), many, ORDERS[1], 3)
    assert set(got) == {(k,) for k in KEYS}
    check(store, model, ("k",), many, ORDERS[0], BIG, {"flag": False})
    # Two columns, beyond the OR of ANDs' limit too.
    pairs = [(k, w) for k in range(-10, 10) for w in [*WORDS, "x", "y", "w"]]
    check(store, model, ("k", "name"), pairs, ORDERS[2], 2)


def test_an_order_of_some_attributes_cuts_ties_somewhere(built: tuple[SourceStore, Model]) -> None:
    """With a partial order, which tied tuples make the cut is not specified: the answer is
    `count` present tuples of each key whose order values are the model's first ones."""
    store, model = built
    keys = [(k,) for k in KEYS]
    with store.pinned() as pin:
        _, tuples = store.fetch_window("s", ("k",), keys, None, [("created", True)], 3, at=pin)
    got = by_key(("k",), tuples)
    expected = model.window(("k",), keys, {}, ORDERS[0], 3)
    present = set(model.present())
    assert set(got) == set(expected)
    for key, ts in got.items():
        assert set(ts) <= present
        assert [t[1] for t in ts] == [t[1] for t in expected[key]]


def test_a_window_reads_its_pinned_snapshot(tmp_path: Path, spark: SparkSession) -> None:
    store = new_store(tmp_path, spark)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1, "a", True), (1, 2, "b", True)), ())})])
    order = [("created", True), ("k", False), ("name", False), ("flag", False)]
    with store.pinned() as pin:
        store.flush([LoggedBatch(2, {"s": SourceChange(((1, 3, "c", False),), ((1, 2, "b", True),))})])
        assert store.fetch_window("s", ("k",), [(1,)], None, order, 1, at=pin) == (1, [(1, 2, "b", True)])
    with store.pinned() as pin:
        assert store.fetch_window("s", ("k",), [(1,)], None, order, 1, at=pin) == (2, [(1, 3, "c", False)])
    with pytest.raises(ValueError, match="not pinned"):
        store.fetch_window("s", ("k",), [(1,)], None, order, 1, at=pin)


def test_errors(built: tuple[SourceStore, Model]) -> None:
    store, _ = built
    with store.pinned() as pin:
        with pytest.raises(KeyError, match="'nope'"):
            store.fetch_window("s", ("k",), [(1,)], None, [("created", True), ("nope", False)], 3, at=pin)
        with pytest.raises(KeyError, match="'Created'"):  # as stored: names are not folded
            store.fetch_window("s", ("k",), [(1,)], None, [("Created", True)], 3, at=pin)
        for count in (0, -1):
            with pytest.raises(ValueError, match="at least 1"):
                store.fetch_window("s", ("k",), [(1,)], None, ORDERS[0], count, at=pin)
        with pytest.raises(KeyError, match="'nope'"):
            store.fetch_window("s", ("nope",), [(1,)], None, ORDERS[0], 3, at=pin)
        with pytest.raises(KeyError, match="'nope'"):
            store.fetch_window("s", ("k",), [(1,)], {"nope": 1}, ORDERS[0], 3, at=pin)
        with pytest.raises(KeyError):
            store.fetch_window("nope", ("k",), [(1,)], None, ORDERS[0], 3, at=pin)
