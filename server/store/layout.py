"""The vocabulary of the store's layout (see `source_store` for the layout on disk): the
store's own columns and name prefixes, how many buckets a part gets, the parts of a source,
the snapshots a manifest describes and the pins readers hold on them, and where a part's
files are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pomoview.server.types import SourceSchema

BUCKET_COLUMN = "_bucket"  # a column of every file: the bucket of the row's clustering columns
BUCKET_DIR_COLUMN = "_bucket_dir"  # the same, as the folder Spark writes each bucket to
PART_PREFIX = "part-"
# The most buckets a part of a source has. A keyed fetch opens one file per bucket its keys
# hash to, and Spark's cost per file opened dominates a fetch of many keys: each file is
# sorted by its cluster, so row-group statistics, not buckets, do the pruning within it.
# Measured on the vote benchmark (2,000,000 votes, two sources fetched at once): a 100-key
# fetch 0.31 s with 16 buckets, 0.23 s with 8, 0.19 s with 4, 0.15 s with 2; a 1-key fetch
# and the hottest key (247,000 votes) alike within noise.
DEFAULT_BUCKETS = 4
# A part gets one bucket per this many rows, up to the source's bucket count.
DEFAULT_ROWS_PER_BUCKET = 1 << 19
# Small row groups (~8k rows of a few numbers) make the statistics of a sorted file fine-grained.
ROW_GROUP_BYTES = 256 << 10
# Up to this many keys of one column, the key filter is an IN list that Spark pushes into the
# Parquet reader (the session's `inFilterThreshold` is raised to it); beyond, a broadcast
# semi-join, which reads all of the keys' buckets but whose plan does not grow with the keys.
PUSH_LIMIT = 256
# The same for keys of several columns, pushed as an OR of ANDs.
OR_LIMIT = 64
# Parquet's page-level filter costs (keys x pages) per file, more than it saves here: row-group
# statistics do the pruning.
READ_OPTIONS = {"parquet.filter.columnindex.enabled": "false"}
# A fetch passes one path per file it reads; Spark lists more than its default 32 paths with a
# distributed job, which would cost more than the fetch.
LISTING_THRESHOLD = 4096


@dataclass(frozen=True)
class Part:
    """A part of a source, as its manifest entry describes it."""

    name: str
    cluster: tuple[str, ...]  # () for an unclustered part: every bucket must be read
    buckets: int
    files: tuple[tuple[int, str], ...]  # (bucket, file name in the part's folder), by bucket
    epochs: tuple[int, int]  # the first and last epoch it may hold
    rows: int | None  # at most this many rows; None if not known
    compacted: bool
    # Every row inserts (a bulk load, a compaction): a fetch that reads only such parts needs
    # no `_epoch` or `_op` to decide what is present, only to drop repeats.
    inserts_only: bool = False


@dataclass(frozen=True)
class SourceState:
    """A source at one version: its schema, its parts (oldest first) and how it is bucketed."""

    schema: SourceSchema
    parts: tuple[Part, ...]
    cluster: tuple[str, ...] | None = None  # None: not chosen yet
    buckets: int = DEFAULT_BUCKETS


@dataclass(frozen=True)
class Snapshot:
    """The store at one version, as one manifest lists it."""

    version: int
    sources: Mapping[str, SourceState]


class Pin:
    """A snapshot of the store held by a reader: the files it lists stay on disk until
    `SourceStore.unpin`. `version` is the snapshot's version."""

    __slots__ = ("_snapshot",)

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot
