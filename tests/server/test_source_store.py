"""The Parquet source store against a plain Python last-writer-wins model; its layout
(buckets, row groups), compaction, pins and recovery.

The tests of what the store does to its files run on both file systems (`KINDS`): a local
folder (`LocalFS`) and the same folder as a `hadoop+file:` URI, through the Spark JVM's
Hadoop `FileSystem` client (`HadoopFS`), the code path of hdfs://, s3a://... stores. The
tests of Spark-side logic (fetch plans, pruning, hashing) run on the local one only."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from pomoview.server.store.bucket_hash import spark_hash
from pomoview.server.store.fs import HadoopFS, LocalFS, StoreLocationError, split_location
from pomoview.server.store.schema import operations_struct
from pomoview.server.store.source_store import SchemaMismatch, SourceStore
from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_, Value

R: SourceSchema = (("a", "int"), ("b", "string"), ("c", "bytes"), ("d", "float"), ("e", "bool"))
S: SourceSchema = (("k", "int"), ("v", "int"))
DOMAIN_R: list[Tuple_] = list(
    itertools.product(range(3), ["x", "é"], [b"", b"\x00\xff"], [0.1, 1e300], [True, False])
)
DOMAIN_S: list[Tuple_] = list(itertools.product(range(4), range(3)))


def no_spark() -> SparkSession:
    raise AssertionError("this operation must not need Spark")


# Each file-system test runs on a local folder and on the same folder through Hadoop's client.
KINDS = pytest.mark.parametrize("kind", ["local", "hadoop"])


def where(root: Path, kind: str) -> str:
    """The store location of the folder `root` for a file system kind."""
    return str(root) if kind == "local" else f"hadoop+file://{root}"


def spark_for(kind: str, request: pytest.FixtureRequest) -> Callable[[], SparkSession]:
    """What opening and fetching without a Spark job may call: nothing for a local store; a
    Hadoop one needs the JVM for every file operation."""
    if kind == "local":
        return no_spark
    session: SparkSession = request.getfixturevalue("spark")
    return lambda: session


def manifest_path(root: Path) -> Path:
    """The current manifest file: the versioned one of highest number, else manifest.json."""
    versioned = sorted(root.glob("manifest-*.json"))
    return versioned[-1] if versioned else root / "manifest.json"


def manifest(root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(manifest_path(root).read_text())
    return doc


class Model:
    """Relations as sets, by last writer per tuple."""

    def __init__(self) -> None:
        self.present: dict[str, set[Tuple_]] = {"r": set(), "s": set()}

    def apply(self, batch: LoggedBatch) -> None:
        for name, change in batch.changes.items():
            self.present[name] |= set(change.inserts)
            self.present[name] -= set(change.deletes)

    def fetch(
        self,
        source: str,
        schema: SourceSchema,
        columns: Sequence[str],
        keys: Collection[Tuple_],
        filters: Mapping[str, Value] | None = None,
    ) -> list[Tuple_]:
        names = [a for a, _ in schema]
        index = [names.index(c) for c in columns]
        wanted = set(keys)
        fixed = [(names.index(a), v) for a, v in (filters or {}).items()]
        return [
            t
            for t in self.present[source]
            if tuple(t[i] for i in index) in wanted and all(t[i] == v for i, v in fixed)
        ]


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


Query = tuple[str, SourceSchema, tuple[str, ...], set[Tuple_], dict[str, Value]]


def queries(rng: random.Random) -> list[Query]:
    def keys(columns: tuple[str, ...], domain: list[Tuple_], schema: SourceSchema) -> set[Tuple_]:
        index = [[a for a, _ in schema].index(c) for c in columns]
        projected = sorted({tuple(t[i] for i in index) for t in domain}, key=repr)
        return set(rng.sample(projected, rng.randint(1, max(1, len(projected) // 2))))

    return [
        ("r", R, (), {()}, {}),
        ("s", S, (), {()}, {}),
        ("r", R, ("a",), keys(("a",), DOMAIN_R, R) | {(99,)}, {}),
        ("r", R, ("c",), keys(("c",), DOMAIN_R, R), {}),
        ("r", R, ("b", "c"), keys(("b", "c"), DOMAIN_R, R) | {("nope", b"")}, {}),
        ("r", R, ("d", "e", "a"), keys(("d", "e", "a"), DOMAIN_R, R), {}),
        ("s", S, ("k", "v"), keys(("k", "v"), DOMAIN_S, S), {}),
        # beyond the IN-list and OR limits: the broadcast semi-join path
        ("s", S, ("v",), {(v,) for v in range(-200, 200)}, {}),
        (
            "r",
            R,
            ("c", "b", "e"),
            set(itertools.product([b"", b"\x00\xff", b"?"], ["x", "é", "y", "z"], [True, False]))
            | {(bytes([i]), "x", True) for i in range(20)},
            {},
        ),
        # constant filters: alone, beside keys, on a key column, on the clustering column
        ("s", S, (), {()}, {"v": rng.randrange(3)}),
        ("r", R, ("b",), keys(("b",), DOMAIN_R, R), {"e": rng.random() < 0.5, "d": 1e300}),
        ("r", R, ("a", "c"), keys(("a", "c"), DOMAIN_R, R), {"a": 1, "b": "é"}),
        ("s", S, ("k",), {(k,) for k in range(-300, 300)}, {"v": 2}),
    ]


def canon(tuples: list[Tuple_]) -> list[tuple[tuple[str, str], ...]]:
    return sorted(tuple((type(v).__name__, repr(v)) for v in t) for t in tuples)


def test_fetch_matches_the_model(tmp_path: Path, spark: SparkSession) -> None:
    """Random flushes, compactions at random points and a change of clustering, with fetches
    of every kind (keys of each type, several columns, constant filters) against the model."""
    rng = random.Random(20240611)
    # Small buckets: parts of a few rows already have several, so fetches prune by bucket.
    store = SourceStore(str(tmp_path), lambda: spark, buckets=4, rows_per_bucket=3)
    store.ensure_source("r", R)
    store.ensure_source("s", S)
    model = Model()
    epoch = 1
    answered = 0
    compacted: list[str] = []
    sizes = (4, 1, 6, 3)
    for round_, flush_size in enumerate(sizes):
        batches = random_batches(rng, epoch, flush_size)
        epoch += flush_size
        for b in batches:
            model.apply(b)
        assert store.flush(batches) == batches[-1].epoch
        if round_ == 1:
            store.cluster_by("s", ("v",))  # the next compaction rebuckets `s`
        for source in ("r", "s"):
            # False when its one part is compacted already (no flush touched it since)
            if round_ > 0 and rng.random() < 0.5 and store.compact(source):
                compacted.append(source)
        chosen = queries(rng)
        if round_ < len(sizes) - 1:
            chosen = rng.sample(chosen, 3)  # every Spark job costs; all kinds run at the end
        for source, schema, columns, keys, filters in chosen:
            version, got = store.fetch(source, columns, keys, filters)
            assert version == batches[-1].epoch
            expected = model.fetch(source, schema, columns, keys, filters)
            assert canon(got) == canon(expected), (source, columns, keys, filters)
            answered += len(got)
    assert answered > 50, "the random workload should leave tuples to find"
    assert set(compacted) == {"r", "s"}, compacted  # the seed compacts both
    assert store.clustering("s") == ("v",)
    assert len(store.clustering("r")) >= 1

    reopened = SourceStore(str(tmp_path), lambda: spark)
    assert reopened.version == store.version == epoch - 1
    assert reopened.clustering("s") == ("v",)
    assert canon(reopened.fetch("r", (), {()})[1]) == canon(list(model.present["r"]))
    for source in ("r", "s"):
        reopened.compact(source)
        assert not reopened.compact(source)  # one compacted part: nothing to do
        assert len(manifest(tmp_path)["sources"][source]["parts"]) <= 1
    for source, schema, columns, keys, filters in queries(rng)[-6:]:
        got = reopened.fetch(source, columns, keys, filters)[1]
        assert canon(got) == canon(model.fetch(source, schema, columns, keys, filters))


@KINDS
def test_store_basics_without_spark_jobs(tmp_path: Path, kind: str, request: pytest.FixtureRequest) -> None:
    store = SourceStore(where(tmp_path, kind), spark_for(kind, request))
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


@KINDS
def test_schema_mismatch_names_source_and_attribute(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    spark = spark_for(kind, request)
    store = SourceStore(where(tmp_path, kind), spark)
    store.ensure_source("vote", (("article_id", "int"), ("user_id", "int")))
    path = manifest_path(tmp_path)
    text = path.read_text()
    store.ensure_source("vote", (("article_id", "int"), ("user_id", "int")))  # identical: no-op
    assert manifest_path(tmp_path) == path and path.read_text() == text

    reopened = SourceStore(where(tmp_path, kind), spark)
    with pytest.raises(SchemaMismatch, match=r"'vote'.*user_id: int.*user_id: string"):
        reopened.ensure_source("vote", (("article_id", "int"), ("user_id", "string")))
    with pytest.raises(SchemaMismatch, match=r"'vote'.*'weight' is only declared"):
        reopened.ensure_source(
            "vote", (("article_id", "int"), ("user_id", "int"), ("weight", "float"))
        )
    with pytest.raises(SchemaMismatch, match=r"'vote'.*'user_id' is only stored"):
        reopened.ensure_source("vote", (("article_id", "int"),))
    assert reopened.schema("vote") == (("article_id", "int"), ("user_id", "int"))


@KINDS
def test_unlisted_parts_are_ignored_and_removed_at_open(
    tmp_path: Path, spark: SparkSession, kind: str
) -> None:
    store = SourceStore(where(tmp_path, kind), lambda: spark)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1), (2, 2)), ())})])
    with pytest.raises(ValueError):
        store.flush([LoggedBatch(1, {"s": SourceChange(((3, 3),), ())})])

    # What a flush that died before replacing the manifest leaves: a complete part that
    # deletes (1, 1) and inserts (3, 3), and a half-written temporary folder.
    stray = tmp_path / "s" / f"part-{2:020d}-{2:020d}"
    rows: list[tuple[Value, ...]] = [(1, 1, 2, -1), (3, 3, 2, 1)]
    spark.createDataFrame(rows, schema=operations_struct(S)).write.parquet(str(stray))
    half = tmp_path / "s" / ".tmp-deadbeef"
    shutil.copytree(stray, half)
    listed = manifest(tmp_path)["sources"]["s"]["parts"]
    assert stray.name not in listed

    assert sorted(store.fetch("s", (), {()})[1]) == [(1, 1), (2, 2)]
    reopened = SourceStore(where(tmp_path, kind), lambda: spark)
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


# --- layout: buckets and row groups -------------------------------------------------------------


def test_bucket_hash_is_sparks(spark: SparkSession) -> None:
    """A fetch finds its keys' buckets in Python: the hash must be Spark's `hash`, on every type."""
    rng = random.Random(5)
    rows = []
    for _ in range(300):
        text = "".join(rng.choice(["a", "é", "€", "𝄞", "z", "\x00"]) for _ in range(rng.randint(0, 9)))
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
        number = rng.choice([0, -1, 1, 2**63 - 1, -(2**63), rng.randint(-(2**63), 2**63 - 1)])
        real = rng.choice([0.0, -0.0, 1.5, -1e300, float("inf"), float("nan"), rng.random()])
        rows.append((number, real, text, data, rng.random() < 0.5))
    schema: SourceSchema = (("n", "int"), ("f", "float"), ("s", "string"), ("b", "bytes"), ("t", "bool"))
    df = spark.createDataFrame(rows, schema=StructType(operations_struct(schema).fields[:5]))
    got = df.selectExpr(
        "hash(n)", "hash(f)", "hash(s)", "hash(b)", "hash(t)", "hash(n, s, b, f, t)"
    ).collect()
    for values, hashes in zip(rows, got, strict=True):
        n, f, s, b, t = values
        expected = [spark_hash([v]) for v in values] + [spark_hash([n, s, b, f, t])]
        assert list(hashes) == expected, values


def scanned_rows(df: Any) -> int:
    """Rows the Parquet scans of an executed DataFrame produced: what row groups were not skipped."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.size()):
        metrics = leaves.apply(i).metrics()
        if metrics.contains("numOutputRows"):
            total += metrics.apply("numOutputRows").value()
    return int(total)


def parquet_files(root: Path, source: str) -> list[str]:
    return sorted(str(p) for p in (root / source).glob("part-*/*.parquet"))


def test_a_keyed_fetch_reads_its_bucket_and_row_groups_only(tmp_path: Path, spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    store = SourceStore(str(tmp_path), lambda: spark, buckets=4)
    store.ensure_source("s", S)
    n, keys = 400_000, 40_000
    store.load("s", spark.range(n).select((F.col("id") % keys).alias("k"), F.col("id").alias("v")), 1)
    files = parquet_files(tmp_path, "s")
    assert len(files) == 4
    for file in files:  # each file holds its bucket's rows only (`b<bucket>-<i>.parquet`)
        bucket = int(Path(file).name[1:6])
        assert set(pq.read_table(file, columns=["_bucket"]).column(0).to_pylist()) == {bucket}, file
    with store.pinned() as pin:
        everything = store.fetch_frame("s", (), {()}, at=pin)
        assert everything is not None and len(everything.inputFiles()) == 4
        one = store.fetch_frame("s", ("k",), {(123,)}, at=pin)
        assert one is not None
        assert len(one.inputFiles()) == 1  # its bucket's file
        assert sorted((r["k"], r["v"]) for r in one.collect()) == [(123, 123 + keys * i) for i in range(10)]
        # sorted by k in small row groups: the scan skips the row groups without the key
        assert scanned_rows(one) < n / 4 / 3
        # a constant filter on the clustering column finds the bucket too
        filtered = store.fetch_frame("s", (), {()}, {"k": 77}, at=pin)
        assert filtered is not None and len(filtered.inputFiles()) == 1
        assert len(filtered.collect()) == 10
        # a fetch by another column cannot prune by bucket, but answers
        by_v = store.fetch_frame("s", ("v",), {(5,), (6,)}, at=pin)
        assert by_v is not None and len(by_v.inputFiles()) == 4
    assert sorted(store.fetch("s", ("k",), {(1,), (2,)})[1]) == sorted(
        (k, k + keys * i) for k in (1, 2) for i in range(10)
    )
    # many keys: the semi-join path reads the buckets of the keys only
    wanted = {(k,) for k in range(0, keys, 97)}
    assert len(store.fetch("s", ("k",), wanted)[1]) == 10 * len(wanted)


@KINDS
def test_clustering_is_learnt_from_the_first_keyed_fetch(
    tmp_path: Path, spark: SparkSession, kind: str
) -> None:
    store = SourceStore(where(tmp_path, kind), lambda: spark, buckets=4, rows_per_bucket=1)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(tuple((k, k % 5) for k in range(40)), ())})])
    assert store.clustering("s") == ("k",)  # the first attribute until a fetch says otherwise
    assert store.compaction_candidates(2) == []
    assert sorted(store.fetch("s", ("v",), {(1,)})[1]) == [(k, 1) for k in range(1, 40, 5)]
    assert store.clustering("s") == ("v",)
    assert store.compaction_candidates(2) == ["s"]  # its part is bucketed by k
    store.flush([LoggedBatch(2, {"s": SourceChange(((100, 1),), ((1, 1),))})])
    entry = manifest(tmp_path)["sources"]["s"]
    assert entry["cluster"] == ["v"]
    assert [entry["layout"][p]["cluster"] for p in entry["parts"]] == [["k"], ["v"]]
    assert store.compact("s")
    assert store.compaction_candidates(2) == []
    with store.pinned() as pin:
        one = store.fetch_frame("s", ("v",), {(1,)}, at=pin)
        assert one is not None and len(one.inputFiles()) == 1
    assert sorted(store.fetch("s", ("v",), {(1,)})[1]) == [(k, 1) for k in range(6, 40, 5)] + [(100, 1)]
    assert sorted(store.fetch("s", ("k",), {(6,), (1,)})[1]) == [(6, 1)]


# --- compaction and pins -------------------------------------------------------------------------


def stored_rows(spark: SparkSession, root: Path, source: str) -> list[tuple[Any, ...]]:
    files = parquet_files(root, source)
    return [tuple(r) for r in spark.read.parquet(*files).select("k", "v", "_epoch", "_op").collect()]


@KINDS
def test_compaction_keeps_latest_operations_and_drops_deleted_tuples(
    tmp_path: Path, spark: SparkSession, kind: str
) -> None:
    store = SourceStore(where(tmp_path, kind), lambda: spark, buckets=2, rows_per_bucket=2)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1), (2, 2), (3, 3), (4, 4)), ())})])
    store.flush(
        [
            LoggedBatch(2, {"s": SourceChange(((1, 1),), ((2, 2), (3, 3)))}),  # (1, 1) again
            LoggedBatch(3, {"s": SourceChange(((3, 3),), ((4, 4),))}),  # (3, 3) comes back
        ]
    )
    store.flush([LoggedBatch(4, {"s": SourceChange(((5, 5),), ((9, 9),))})])  # (9, 9) never was
    assert len(stored_rows(spark, tmp_path, "s")) == 4 + 5 + 2
    old = sorted((tmp_path / "s").glob("part-*"))
    assert len(old) == 3
    present = [(1, 1), (3, 3), (5, 5)]
    assert sorted(store.fetch("s", (), {()})[1]) == present

    assert store.compact("s")
    rows = stored_rows(spark, tmp_path, "s")
    # one row per present tuple, its latest insert; no delete, nothing superseded
    assert sorted(rows) == [(1, 1, 2, 1), (3, 3, 3, 1), (5, 5, 4, 1)]
    assert not any(p.exists() for p in old)
    assert store.version == 4
    assert sorted(store.fetch("s", (), {()})[1]) == present
    assert sorted(store.fetch("s", ("k",), {(2,), (3,), (4,), (9,)})[1]) == [(3, 3)]
    # writes after the compaction land after it, and a delete of a compacted tuple holds
    store.flush([LoggedBatch(5, {"s": SourceChange(((2, 2),), ((3, 3),))})])
    assert sorted(store.fetch("s", (), {()})[1]) == [(1, 1), (2, 2), (5, 5)]
    reopened = SourceStore(where(tmp_path, kind), lambda: spark)
    assert reopened.version == 5
    assert sorted(reopened.fetch("s", ("k",), {(1,), (2,), (3,)})[1]) == [(1, 1), (2, 2)]

    store.flush([LoggedBatch(6, {"s": SourceChange((), ((1, 1), (2, 2), (5, 5)))})])
    assert store.compact("s")  # everything deleted: no part at all
    assert parquet_files(tmp_path, "s") == []
    assert store.fetch("s", (), {()}) == (6, [])


@KINDS
def test_a_pinned_snapshot_survives_compaction(tmp_path: Path, spark: SparkSession, kind: str) -> None:
    store = SourceStore(where(tmp_path, kind), lambda: spark)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1), (2, 2)), ())})])
    store.flush([LoggedBatch(2, {"s": SourceChange(((3, 3),), ())})])
    pin = store.pin()
    old = sorted((tmp_path / "s").glob("part-*"))
    store.flush([LoggedBatch(3, {"s": SourceChange((), ((1, 1),))})])
    assert store.compact("s")
    listed = manifest(tmp_path)["sources"]["s"]["parts"]
    assert len(listed) == 1 and not {p.name for p in old} & set(listed)
    assert all(p.exists() for p in old), "the pinned snapshot reads them"
    assert pin.version == 2
    assert sorted(store.fetch("s", (), {()}, at=pin)[1]) == [(1, 1), (2, 2), (3, 3)]
    assert store.fetch("s", ("k",), {(1,)}, at=pin) == (2, [(1, 1)])
    assert store.fetch("s", ("k",), {(1,)}) == (3, [])
    store.unpin(pin)
    assert not any(p.exists() for p in old)
    with pytest.raises(ValueError):
        store.fetch("s", (), {()}, at=pin)
    with pytest.raises(ValueError):
        store.unpin(pin)

    # A crash between a compaction's manifest and the deletion of what it replaced: the
    # replaced parts are unlisted, and the next open deletes them.
    store.flush([LoggedBatch(4, {"s": SourceChange(((4, 4),), ())})])
    with store.pinned():
        before = sorted((tmp_path / "s").glob("part-*"))
        assert store.compact("s")
        assert all(p.exists() for p in before)
        reopened = SourceStore(where(tmp_path, kind), lambda: spark)
        assert not any(p.exists() for p in before)
        assert sorted(reopened.fetch("s", (), {()})[1]) == [(2, 2), (3, 3), (4, 4)]


@KINDS
def test_a_store_written_before_buckets_still_reads(tmp_path: Path, spark: SparkSession, kind: str) -> None:
    """Parts listed by name only (one unbucketed folder of files) are read whole. Through
    Hadoop, the store's manifest.json is adopted, then replaced by versioned manifests."""
    part = f"part-{1:020d}-{2:020d}"
    rows: list[tuple[Value, ...]] = [(1, 1, 1, 1), (2, 2, 1, 1), (1, 1, 2, -1), (3, 3, 2, 1)]
    ops = spark.createDataFrame(rows, schema=operations_struct(S))
    ops.coalesce(1).write.parquet(str(tmp_path / "s" / part))
    manifest = {"version": 2, "sources": {"s": {"schema": [["k", "int"], ["v", "int"]], "parts": [part]}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    store = SourceStore(where(tmp_path, kind), lambda: spark)
    assert sorted(store.fetch("s", ("k",), {(1,), (3,)})[1]) == [(3, 3)]
    store.flush([LoggedBatch(3, {"s": SourceChange(((1, 1),), ((2, 2),))})])
    assert (tmp_path / "manifest.json").exists() == (kind == "local")
    assert sorted(store.fetch("s", (), {()})[1]) == [(1, 1), (3, 3)]
    assert store.compact("s")
    reopened = SourceStore(where(tmp_path, kind), lambda: spark)
    assert sorted(reopened.fetch("s", (), {()})[1]) == [(1, 1), (3, 3)]


@KINDS
def test_a_flush_during_a_compaction_is_kept(tmp_path: Path, spark: SparkSession, kind: str) -> None:
    """A compaction replaces the parts it read; a part flushed meanwhile stays, after it."""
    during: list[Callable[[], object]] = []

    def spark_that_flushes_first() -> SparkSession:
        # compact asks for Spark once it has read its snapshot
        while during:
            during.pop()()
        return spark

    store = SourceStore(where(tmp_path, kind), spark_that_flushes_first)
    store.ensure_source("s", S)
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1), (2, 2)), ())})])
    store.flush([LoggedBatch(2, {"s": SourceChange(((3, 3),), ((2, 2),))})])
    during.append(lambda: store.flush([LoggedBatch(3, {"s": SourceChange(((2, 2),), ((1, 1),))})]))
    assert store.compact("s")
    assert not during
    parts = manifest(tmp_path)["sources"]["s"]["parts"]
    assert len(parts) == 2 and parts[1].startswith(f"part-{3:020d}-{3:020d}-f") and "-c" in parts[0]
    version, tuples = store.fetch("s", (), {()})
    assert (version, sorted(tuples)) == (3, [(2, 2), (3, 3)])
    reopened = SourceStore(where(tmp_path, kind), lambda: spark)
    assert sorted(reopened.fetch("s", ("k",), {(1,), (2,)})[1]) == [(2, 2)]


# --- locations and the Hadoop file system ----------------------------------------------------


def test_store_locations(tmp_path: Path) -> None:
    assert split_location(str(tmp_path)) == ("local", str(tmp_path))
    assert split_location((tmp_path / "a b").as_uri()) == ("local", str(tmp_path / "a b"))
    assert split_location("file://localhost/srv/x") == ("local", "/srv/x")
    assert split_location("hadoop+file:///srv/x") == ("hadoop", "file:///srv/x")
    for uri in ("hdfs://namenode:8020/pomoview", "s3a://bucket/store", "abfs://c@acct.dfs.core.windows.net/s"):
        assert split_location(uri) == ("hadoop", uri)
    for bad, reason in (
        ("s3a:bucket/store", "must be absolute"),
        ("hadoop+relative/path", "must be followed by a URI"),
        ("file://host/srv/x", "not the host 'host'"),
        ("hdfs://namenode/p?replication=2", "no query or fragment"),
        ("hdfs://[::1/p", "not a path or a URI"),
    ):
        with pytest.raises(ValueError, match=reason):
            split_location(bad)
        with pytest.raises(StoreLocationError, match=reason):
            SourceStore(bad, no_spark)  # refused before anything needs Spark
    assert isinstance(SourceStore(str(tmp_path), no_spark)._fs, LocalFS)


def test_hadoop_manifests_are_new_files_and_an_incomplete_one_is_skipped(
    tmp_path: Path, spark: SparkSession
) -> None:
    location = where(tmp_path, "hadoop")
    store = SourceStore(location, lambda: spark)
    assert isinstance(store._fs, HadoopFS)
    store.ensure_source("s", S)
    store.cluster_by("s", ("v",))
    # Each publication is a new file; the one it supersedes is deleted once it is written.
    assert [p.name for p in tmp_path.glob("manifest*.json")] == [f"manifest-{2:020d}.json"]
    doc = manifest(tmp_path)
    assert doc["sources"]["s"]["cluster"] == ["v"] and doc["version"] == 0

    # A publication that died mid-write (HDFS shows a file being written): a truncated
    # manifest of a higher number. The open skips and deletes it, and never reuses its number.
    newer = json.dumps({**doc, "version": 7}, indent=1)
    (tmp_path / f"manifest-{3:020d}.json").write_text(newer[: len(newer) // 2])
    reopened = SourceStore(location, lambda: spark)
    assert reopened.version == 0 and reopened.clustering("s") == ("v",)
    assert [p.name for p in tmp_path.glob("manifest*.json")] == [f"manifest-{2:020d}.json"]
    reopened.ensure_source("t", S)
    assert [p.name for p in tmp_path.glob("manifest*.json")] == [f"manifest-{4:020d}.json"]

    # create(overwrite=false): a second store on the same location (against the rules) fails
    # its publication instead of overwriting, and keeps its own state.
    other = SourceStore(location, lambda: spark)
    reopened.ensure_source("u", S)
    with pytest.raises(Exception, match="FileAlreadyExists|already exists"):
        other.ensure_source("w", S)
    assert other.schema("w") is None
    assert sorted(SourceStore(location, lambda: spark).schemas()) == ["s", "t", "u"]

    # Opening it as a plain local folder would read no manifest: refused, with the way out.
    with pytest.raises(StoreLocationError, match="hadoop\\+file://"):
        SourceStore(str(tmp_path), no_spark)
    # A URI scheme Hadoop has no file system for is refused when the store opens.
    with pytest.raises(StoreLocationError, match='No FileSystem for scheme "nosuchfs"'):
        SourceStore("nosuchfs://bucket/store", lambda: spark)


def test_rows_at_most_counts_flushed_and_loaded_parts(tmp_path: Path, spark: SparkSession) -> None:
    """What `serve --whole-source-rows` decides by: a flush's part counts its operations, a
    bulk load's is counted from its Parquet footers (once), a source not registered has no
    count."""
    from pyspark.sql import functions as F

    store = SourceStore(str(tmp_path / "store"), lambda: spark)
    store.ensure_source("s", (("k", "int"), ("v", "int")))
    assert store.rows_at_most("s") == 0 and store.rows_at_most("other") is None
    store.flush([LoggedBatch(1, {"s": SourceChange(((1, 1), (2, 2)), ((3, 3),))})])
    assert store.rows_at_most("s") == 3  # two inserts and a delete: at most
    store.load("s", spark.range(500).select((F.col("id") % 7).alias("k"), F.col("id").alias("v")), 2)
    assert store.rows_at_most("s") == 503
