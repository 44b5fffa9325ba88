"""The keyed Spark fetch of an upquery: one Spark job over the Parquet store at a pinned
snapshot, for some keys of one source, its answer split by key (`Prefetched`).

It runs on `UpqueryJobs`' threads, without any scheduler lock; the lookup rounds advance
its answer to the applied epoch with the log tail.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pomoview.dataflow.node import FetchRequest, Filters, Window
from pomoview.dataflow.state.keyed_state import Key, RowLayout
from pomoview.planner.compile import CompiledProgram
from pomoview.server.errors import DeadlineExceeded, Unavailable
from pomoview.server.metrics.counters import Counters
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.spark.deadline import SparkTimeout
from pomoview.server.spark.executors import ExecutorWatch, NoExecutors
from pomoview.server.spark.session import SparkSessionLost, spark_error_reason
from pomoview.server.store.source_store import Pin, SourceStore
from pomoview.server.types import SourceSchema, Tuple_

# In the reason of a failed job when the Spark session died with it (the lookup rounds put
# such a failure first among a round's).
SESSION_DIED = "Spark session died"


@dataclass(frozen=True)
class Prefetched:
    """A keyed Spark job's answer: `source` at store `version`, restricted to `keys` and to
    the tuples matching `filters` (attribute == value); `by_key` holds the tuples of each
    key that has any."""

    source: str
    columns: tuple[str, ...]
    keys: frozenset[Key]
    version: int
    by_key: dict[Key, list[Tuple_]]
    filters: Filters = ()
    # Packed form (a source of one int key column and one int value column, read as Arrow):
    # each key's values, sorted and unique, in place of `by_key`.
    packed: dict[Key, np.ndarray] | None = None
    layout: RowLayout | None = None
    # A windowed job's (FetchRequest.window): each key's first tuples only, not all of them.
    window: Window | None = None


class SparkFetch:
    """Runs keyed Spark jobs for upqueries (`run`, given to `UpqueryJobs`).

    `program()` is the installed program (for the source's schema), `spark()` the Spark
    provider (asked, after a failure, whether its session died)."""

    def __init__(
        self,
        store: SourceStore,
        program: Callable[[], CompiledProgram],
        spark: Callable[[], object],
        counters: Counters,
        metrics: Metrics,
    ) -> None:
        self._store = store
        self._program = program
        self._spark = spark
        self._counters = counters
        self._metrics = metrics

    def run(self, pending: FetchRequest, pin: object) -> Prefetched:
        """One keyed Spark job over the Parquet store at the pinned snapshot `pin`, run without
        any scheduler lock."""
        self._counters.add_spark_job()
        with self._metrics.spark_job_seconds.time():
            return self._fetch(pending, pin)

    def _fetch(self, pending: FetchRequest, pin: object) -> Prefetched:
        assert isinstance(pin, Pin)
        schema = self._program().source_schema(pending.source)
        try:
            # On a cluster, a job that no executor can run fails within seconds (NoExecutors).
            with self._executor_guard():
                version, answer = self._store_fetch(pending, schema, pin)
        except SparkTimeout as err:
            # Every lookup waiting on this job gets it; nothing is filled, as below.
            raise DeadlineExceeded(
                f"the upquery on source {pending.source!r} failed: {err.message}; retry the lookup"
            ) from err
        except NoExecutors as err:
            raise Unavailable(f"the upquery on source {pending.source!r} failed: {err.message}") from err
        except Exception as err:
            # Nothing is filled: the circuit saw only FetchPending, so the states that asked
            # stay missing and the next lookup runs the job again.
            raise Unavailable(self._failure(pending.source, err)) from err
        if isinstance(answer, pa.Table):
            assert pending.window is None, "a windowed fetch answers in tuples"
            return _packed(pending, schema, version, answer)
        tuples = answer
        positions = [[a for a, _ in schema].index(c) for c in pending.columns]
        by_key: dict[Key, list[Tuple_]] = {}
        if len(positions) == 1:
            [p] = positions
            for t in tuples:
                by_key.setdefault((t[p],), []).append(t)
        else:
            for t in tuples:
                by_key.setdefault(tuple(t[i] for i in positions), []).append(t)
        return Prefetched(
            pending.source,
            pending.columns,
            frozenset(pending.keys),
            version,
            by_key,
            pending.filters,
            window=pending.window,
        )

    def _store_fetch(
        self, pending: FetchRequest, schema: SourceSchema, pin: Pin
    ) -> tuple[int, pa.Table | list[Tuple_]]:
        """The store's answer: an Arrow table (packed form) or tuples, and the version read."""
        if pending.window is not None:
            return self._store.fetch_window(  # type: ignore[no-any-return]
                pending.source,
                pending.columns,
                list(pending.keys),  # type: ignore[arg-type]
                dict(pending.filters),
                pending.window.order,
                pending.window.count,
                at=pin,
            )
        if _packable(schema, pending.columns):
            return self._store.fetch_columns(  # type: ignore[no-any-return]
                pending.source, pending.columns, list(pending.keys), dict(pending.filters), at=pin  # type: ignore[arg-type]
            )
        return self._store.fetch(  # type: ignore[no-any-return]
            pending.source, pending.columns, list(pending.keys), dict(pending.filters), at=pin  # type: ignore[arg-type]
        )

    def _executor_guard(self) -> AbstractContextManager[None]:
        """The provider's executor watch's guard over its current session, if it has a watch."""
        watch = getattr(self._spark, "executors", None)
        current = getattr(self._spark, "current", None)
        if isinstance(watch, ExecutorWatch) and callable(current):
            return watch.guard(current())
        return nullcontext()

    def _failure(self, source: str, err: Exception) -> str:
        """The reason a keyed Spark job on `source` failed; if the Spark session died with it,
        the provider starts a new one and the reason says so."""
        if isinstance(err, SparkSessionLost):
            dead: str | None = err.reason
        else:
            check = getattr(self._spark, "check", None)
            dead = check() if callable(check) else None
        if dead is not None:
            return (
                f"the upquery on source {source!r} failed: the {SESSION_DIED} ({dead}); "
                "a new one is starting, retry the lookup"
            )
        return f"the upquery on source {source!r} failed in Spark: {spark_error_reason(err)}"


def _packable(schema: SourceSchema, columns: tuple[str, ...]) -> bool:
    """Whether a fetch of a source by `columns` is answered in packed form: two int
    attributes, asked by one of them (a vote by its article)."""
    return len(schema) == 2 and len(columns) == 1 and all(t == "int" for _, t in schema)


def _packed(pending: FetchRequest, schema: SourceSchema, version: int, table: pa.Table) -> Prefetched:
    """A Spark job's Arrow answer split by key, with numpy: each key's values sorted and
    without repeats."""
    names = [a for a, _ in schema]
    key_pos = names.index(pending.columns[0])
    value_pos = 1 - key_pos
    keys = table.column(f"c{key_pos}").to_numpy()
    values = table.column(f"c{value_pos}").to_numpy()
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    if len(keys) > 1:  # the table may repeat a tuple: sorted, repeats are neighbours
        fresh = np.empty(len(keys), dtype=bool)
        fresh[0] = True
        np.not_equal(keys[1:], keys[:-1], out=fresh[1:])
        fresh[1:] |= values[1:] != values[:-1]
        keys, values = keys[fresh], values[fresh]
    packed: dict[Key, np.ndarray] = {}
    if len(keys):
        uniq, starts = np.unique(keys, return_index=True)
        ends = [*starts[1:].tolist(), len(keys)]
        for key, start, end in zip(uniq.tolist(), starts.tolist(), ends, strict=True):
            # A copy, not a view: a view would keep the whole job's array alive for as long
            # as any one key's state holds its slice.
            packed[(key,)] = values[start:end].copy()
    return Prefetched(
        pending.source,
        pending.columns,
        frozenset(pending.keys),
        version,
        {},
        pending.filters,
        packed=packed,
        layout=RowLayout((key_pos,), 2),
    )
