"""The Parquet source store against a plain Python last-writer-wins model."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pomoview.server.source_store import SchemaMismatch, SourceStore, _struct
from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_, Value

R: SourceSchema = (("a", "int"), ("b", "string"), ("c", "bytes"), ("d", "float"), ("e", "bool"))
S: SourceSchema = (("k", "int"), ("v", "int"))
DOMAIN_R: list[Tuple_] = list(
    itertools.product(range(3), ["x", "é"], [b"", b"\x00\xff"], [0.1, 1e300], [True, False])
)
DOMAIN_S: list[Tuple_] = list(itertools.product(range(4), range(3)))


def no_spark() -> SparkSession:
    raise AssertionError("this operation must not need Spark")


class Model:
    """Relations as sets, by last writer per tuple."""

    def __init__(self) -> None:
        self.present: dict[str, set[Tuple_]] = {"r": set(), "s": set()}

    def apply(self, batch: LoggedBatch) -> None:
        for name, change in batch.changes.items():
            self.present[name] |= set(change.inserts)
            self.present[name] -= set(change.deletes)

    def fetch(
        self, source: str, schema: SourceSchema, columns: Sequence[str], keys: Collection[Tuple_]
    ) -> list[Tuple_]:
        index = [[a for a, _ in schema].index(c) for c in columns]
        wanted = set(keys)
        return [t for t in self.present[source] if tuple(t[i] for i in index) in wanted]


def random_batches(rng: random.Random, first: int, count: int) -> list[LoggedBatch]:
    batches = []
    for epoch in range(first, first + count):
        changes = {}
        for name, domain in (("r", DOMAIN_R), ("s", DOMAIN_S)):
            if rng.random() < 0.3:
                continue  # some batches leave a source alone
            touched = rng.sample(domain, rng.randint(1, 8))
            cut = rng.randint(0, len(touched))
            changes[name] = SourceChange(tuple(touched[:cut]), tuple(touched[cut:]))
        batches.append(LoggedBatch(epoch, changes))
    return batches


def queries(rng: random.Random) -> list[tuple[str, SourceSchema, tuple[str, ...], set[Tuple_]]]:
    def keys(columns: tuple[str, ...], domain: list[Tuple_], schema: SourceSchema) -> set[Tuple_]:
        index = [[a for a, _ in schema].index(c) for c in columns]
        projected = sorted({tuple(t[i] for i in index) for t in domain}, key=repr)
        return set(rng.sample(projected, rng.randint(1, max(1, len(projected) // 2))))

    return [
        ("r", R, (), {()}),
        ("s", S, (), {()}),
        ("r", R, ("a",), keys(("a",), DOMAIN_R, R) | {(99,)}),
        ("r", R, ("c",), keys(("c",), DOMAIN_R, R)),
        ("r", R, ("b", "c"), keys(("b", "c"), DOMAIN_R, R) | {("nope", b"")}),
        ("r", R, ("d", "e", "a"), keys(("d", "e", "a"), DOMAIN_R, R)),
        ("s", S, ("k", "v"), keys(("k", "v"), DOMAIN_S, S)),
        # beyond the IN-list and OR limits: the broadcast semi-join path
        ("s", S, ("v",), {(v,) for v in range(-200, 200)}),
        (
            "r",
            R,
            ("c", "b", "e"),
            set(itertools.product([b"", b"\x00\xff", b"?"], ["x", "é", "y", "z"], [True, False]))
            | {(bytes([i]), "x", True) for i in range(20)},
        ),
    ]


def canon(tuples: list[Tuple_]) -> list[tuple[tuple[str, str], ...]]:
    return sorted(tuple((type(v).__name__, repr(v)) for v in t) for t in tuples)


def test_fetch_matches_the_model(tmp_path: Path, spark: SparkSession) -> None:
    rng = random.Random(20240611)
    store = SourceStore(str(tmp_path), lambda: spark)
    store.ensure_source("r", R)
    store.ensure_source("s", S)
    model = Model()
    epoch = 1
    answered = 0
    sizes = (4, 1, 6)
    for round_, flush_size in enumerate(sizes):
        batches = random_batches(rng, epoch, flush_size)
        epoch += flush_size
        for b in batches:
            model.apply(b)
        assert store.flush(batches) == batches[-1].epoch
        chosen = queries(rng)
        if round_ < len(sizes) - 1:
            chosen = rng.sample(chosen, 3)  # every Spark job costs; all kinds run at the end
        for source, schema, columns, keys in chosen:
            version, got = store.fetch(source, columns, keys)
            assert version == batches[-1].epoch
            expected = model.fetch(source, schema, columns, keys)
            assert canon(got) == canon(expected), (source, columns, keys)
            answered += len(got)
    assert answered > 50, "the random workload should leave tuples to find"

    reopened = SourceStore(str(tmp_path), lambda: spark)
    assert reopened.version == store.version == epoch - 1
    assert canon(reopened.fetch("r", (), {()})[1]) == canon(list(model.present["r"]))


def test_store_basics_without_spark(tmp_path: Path) -> None:
    store = SourceStore(str(tmp_path), no_spark)
    assert store.version == 0
    store.ensure_source("r", R)
    assert store.flush([]) == 0
    assert store.fetch("r", (), {()}) == (0, [])  # no parts: no Spark job
    assert store.fetch("r", ("a",), set()) == (0, [])
    with pytest.raises(KeyError):
        store.fetch("missing", (), {()})
    with pytest.raises(KeyError):
        store.fetch("r", ("zz",), {(1,)})
    with pytest.raises(ValueError):
        store.fetch("r", ("a",), {(1, 2)})
    with pytest.raises(KeyError):
        store.flush([LoggedBatch(1, {"missing": SourceChange(((1,),), ())})])
    for bad in ((("_op", "int"),), (("x", "int"), ("X", "int")), (("x", "decimal"),)):
        with pytest.raises(ValueError):
            store.ensure_source("t", bad)
    with pytest.raises(ValueError):
        store.ensure_source("../escape", S)


def test_schema_mismatch_names_source_and_attribute(tmp_path: Path) -> None:
    store = SourceStore(str(tmp_path), no_spark)
    store.ensure_source("vote", (("article_id", "int"), ("user_id", "int")))
    manifest = (tmp_path / "manifest.json").read_text()
    store.ensure_source("vote", (("article_id", "int"), ("user_id", "int")))  # identical: no-op
    assert (tmp_path / "manifest.json").read_text() == manifest

    reopened = SourceStore(str(tmp_path), no_spark)
    with pytest.raises(SchemaMismatch, match=r"'vote'.*user_id: int.*user_id: string"):
        reopened.ensure_source("vote", (("article_id", "int"), ("user_id", "string")))
    with pytest.raises(SchemaMismatch, match=r"'vote'.*'weight' is only declared"):
        reopened.ensure_source(
            "vote", (("article_id", "int"), ("user_id", "int"), ("weight", "float"))
        )
    with pytest.raises(SchemaMismatch, match=r"'vote'.*'user_id' is only stored"):
        reopened.ensure_source("vote", (("article_id", "int"),))
    assert reopened.schema("vote") == (("article_id", "int"), ("user_id", "int"))


def test_unlisted_parts_are_ignored_and_removed_at_open(
    tmp_path: Path, spark: SparkSession
) -> None:
    store = SourceStore(str(tmp_path), lambda: spark)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1), (2, 2)), ())})])
    with pytest.raises(ValueError):
        store.flush([LoggedBatch(1, {"s": SourceChange(((3, 3),), ())})])

    # What a flush that died before replacing the manifest leaves: a complete part that
    # deletes (1, 1) and inserts (3, 3), and a half-written temporary folder.
    stray = tmp_path / "s" / f"part-{2:020d}-{2:020d}"
    rows: list[tuple[Value, ...]] = [(1, 1, 2, -1), (3, 3, 2, 1)]
    spark.createDataFrame(rows, schema=_struct(S)).write.parquet(str(stray))
    half = tmp_path / "s" / ".tmp-deadbeef"
    shutil.copytree(stray, half)
    listed = json.loads((tmp_path / "manifest.json").read_text())["sources"]["s"]["parts"]
    assert stray.name not in listed

    assert sorted(store.fetch("s", (), {()})[1]) == [(1, 1), (2, 2)]
    reopened = SourceStore(str(tmp_path), lambda: spark)
    assert not stray.exists() and not half.exists()
    assert reopened.version == 1
    assert sorted(reopened.fetch("s", ("k",), {(1,), (3,)})[1]) == [(1, 1)]

    # the same part name can be written for real after the crash
    assert reopened.flush([LoggedBatch(2, {"s": SourceChange(((4, 4),), ((2, 2),))})]) == 2
    assert sorted(reopened.fetch("s", (), {()})[1]) == [(1, 1), (4, 4)]


def test_fetch_answers_from_one_snapshot_while_flushing(
    tmp_path: Path, spark: SparkSession
) -> None:
    """A fetch whose snapshot predates a flush answers at its own version."""
    store_ref: list[SourceStore] = []
    flushed_inside: list[int] = []
    calls = itertools.count()

    def spark_that_flushes_first() -> SparkSession:
        # fetch has taken its snapshot when it asks for Spark; flush in between (the flush
        # asks for Spark too, hence the counter).
        if next(calls) == 0:
            flushed_inside.append(
                store_ref[0].flush([LoggedBatch(2, {"s": SourceChange(((2, 2),), ((1, 1),))})])
            )
        return spark

    provider: Callable[[], SparkSession] = spark_that_flushes_first
    store = SourceStore(str(tmp_path), lambda: spark)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1),), ())})])
    racing = SourceStore(str(tmp_path), provider)
    store_ref.append(racing)
    assert racing.fetch("s", (), {()}) == (1, [(1, 1)])
    assert flushed_inside == [2]
    assert racing.fetch("s", (), {()}) == (2, [(2, 2)])
