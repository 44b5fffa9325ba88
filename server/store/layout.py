"""The vocabulary of the store's layout (see `source_store` for the layout on disk): the
store's own columns and name prefixes, how many buckets a part gets, the parts of a source,
the snapshots a manifest describes and the pins readers hold on them, and where a part's
files are."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pomoview.server.store.fs import StoreFS
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

    def state(self, source: str) -> SourceState:
        """The state of `source`; KeyError if it is not registered."""
        state = self.sources.get(source)
        if state is None:
            raise KeyError(f"source {source!r} is not registered in the store")
        return state


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


def new_part_name(epochs: tuple[int, int], kind: str) -> str:
    """A part folder's name: the epochs it holds, `kind` (`f`lush, `l`oad, `c`ompaction) and a
    random suffix. Unique: a retry after a publication whose outcome is unknown (the manifest
    may be on disk, the fsync after it failed) must not reuse, and so first delete, a folder
    that manifest may list."""
    return f"{PART_PREFIX}{epochs[0]:020d}-{epochs[1]:020d}-{kind}{uuid.uuid4().hex[:8]}"


def part_folder(fs: StoreFS, source: str, name: str) -> str:
    """The folder of part `name` of `source`."""
    return fs.join(fs.root, source, name)


def part_paths(fs: StoreFS, source: str, part: Part, buckets: Collection[int] | None = None) -> list[str]:
    """The paths Spark reads `part`'s files by: all of them, or those of `buckets`."""
    folder = part_folder(fs, source, part.name)
    return [fs.spark_path(fs.join(folder, f)) for b, f in part.files if buckets is None or b in buckets]
