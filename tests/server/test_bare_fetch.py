"""`fetch_columns` over parts whose every row inserts (bulk loads, compactions) reads the
attributes alone, without `_epoch` and `_op`. Its answer, with repeats removed, must equal
`fetch`'s (the stamped path) and a Python model, before and after a flush adds deletes (which
turn the stamped path back on), and across a reopen (the manifest keeps the mark)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from pomoview.server.store.source_store import SourceStore
from pomoview.server.types import LoggedBatch, SourceChange

SCHEMA = [("k", "int"), ("v", "int")]


def _present(
    store: SourceStore, keys: list[tuple[int]], bare: bool
) -> tuple[set[tuple[int, int]], set[tuple[int, int]], int]:
    """(fetch_columns' tuples, fetch's tuples, how many rows fetch_columns answered);
    checks that fetch_columns read the stamps or not, as `bare` says."""
    reads = store._reads  # the store's fetcher
    frame = reads.operations
    asked: list[bool] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("stamps", True))
        return frame(*args, **kwargs)

    reads.operations = spy  # type: ignore[method-assign]
    try:
        with store.pinned() as pin:
            _, table = store.fetch_columns("s", ("k",), keys, at=pin)
            _, tuples = store.fetch("s", ("k",), keys, at=pin)
    finally:
        reads.operations = frame  # type: ignore[method-assign]
    assert asked == [not bare, True], asked
    assert not isinstance(table, list), "two int attributes answer as an Arrow table"
    assert table.column_names == ["c0", "c1"]
    columnar = set(zip(table.column("c0").to_pylist(), table.column("c1").to_pylist(), strict=True))
    return columnar, set(tuples), table.num_rows  # type: ignore[arg-type]


def test_bare_fetches_of_loaded_parts_equal_the_stamped_path(tmp_path: Path, spark: SparkSession) -> None:
    rng = random.Random(5)
    store = SourceStore(str(tmp_path / "store"), lambda: spark, buckets=4, rows_per_bucket=50)
    store.ensure_source("s", SCHEMA)  # type: ignore[arg-type]
    store.cluster_by("s", ["k"])
    first = [(rng.randrange(30), rng.randrange(50)) for _ in range(600)]
    second = [(rng.randrange(30), rng.randrange(50)) for _ in range(300)] + first[:100]  # repeats
    store.load("s", spark.createDataFrame(first, "k long, v long"), 1)
    store.load("s", spark.createDataFrame(second, "k long, v long"), 2)
    model = set(first) | set(second)
    keys = [(k,) for k in rng.sample(range(35), 12)]  # some keys have no rows

    def expected() -> set[tuple[int, int]]:
        return {t for t in model if (t[0],) in keys}

    columnar, stamped, rows = _present(store, keys, bare=True)
    assert columnar == stamped == expected()
    assert rows > len(expected()), "the repeats across the two loads come back, for the caller to drop"

    # A flush with deletes: that part has `_op`, so the stamped path is taken again.
    gone = sorted(expected())[:5]
    added = [(keys[0][0], 1000)]
    store.flush([LoggedBatch(3, {"s": SourceChange(tuple(added), tuple(gone))})])
    model.difference_update(gone)
    model.update(added)
    columnar, stamped, _ = _present(store, keys, bare=False)
    assert columnar == stamped == expected()

    # Compacted: inserts only again, and the mark survives a reopen of the manifest.
    assert store.compact("s")
    reopened = SourceStore(str(tmp_path / "store"), lambda: spark, buckets=4, rows_per_bucket=50)
    columnar, stamped, rows = _present(reopened, keys, bare=True)
    assert columnar == stamped == expected()
    assert rows == len(expected())
