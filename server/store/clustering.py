"""How the parts a store writes now are bucketed: by the source's clustering columns (chosen
with `SourceStore.cluster_by`, else learnt from the first keyed fetch, else its first
attribute), into as many buckets as their rows call for, up to the source's bucket count."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pomoview.server.store.layout import SourceState


class Clustering:
    """A part gets one bucket per `rows_per_bucket` rows (see `bucket_count`)."""

    def __init__(self, rows_per_bucket: int) -> None:
        self._rows_per_bucket = rows_per_bucket
        self._lock = threading.Lock()
        self._learned: dict[str, tuple[str, ...]] = {}  # first keyed fetch's columns

    def learn(self, source: str, columns: Sequence[str]) -> None:
        """A keyed fetch of `source` by `columns`: the clustering of a source that has none
        chosen, if it is the first."""
        with self._lock:
            self._learned.setdefault(source, tuple(columns))

    def columns(self, source: str, state: SourceState) -> tuple[str, ...]:
        """The columns a part of `source` written now is clustered by."""
        if state.cluster is not None:
            return state.cluster
        with self._lock:
            learned = self._learned.get(source)
        if learned is not None:
            return learned
        return (state.schema[0][0],) if state.schema else ()

    def persisted(self, source: str, state: SourceState) -> tuple[str, ...] | None:
        """What the manifest should record as the clustering of `source`: a learnt one sticks."""
        if state.cluster is not None:
            return state.cluster
        with self._lock:
            return self._learned.get(source)

    def bucket_count(self, state: SourceState, rows: int | None) -> int:
        """The buckets of a part of `rows` rows (the source's bucket count if not known)."""
        if rows is None:
            return state.buckets
        return max(1, min(state.buckets, -(-rows // self._rows_per_bucket)))

    def estimated_rows(self, state: SourceState) -> int:
        """The rows of `state`'s parts at most, a part whose count is not known counted as if
        its buckets were full."""
        full = state.buckets * self._rows_per_bucket
        return sum(p.rows if p.rows is not None else full for p in state.parts)
