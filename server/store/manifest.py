"""The source store's manifest: the document that lists its sources and parts, read at open
and written for each new snapshot, and the folders it does not list, deleted at open (see
`source_store` for the layout, `fs` for how a manifest is replaced atomically)."""

from __future__ import annotations

import errno
from typing import Any

from pomoview.server.spark.session import spark_error_reason
from pomoview.server.store.fs import TMP_PREFIX, StoreFS
from pomoview.server.store.layout import PART_PREFIX, Part, Snapshot, SourceState, part_folder


class StoreWriteError(Exception):
    """A flush, load or compaction could not write the store (a full disk, an I/O error, a
    failed Spark job): the store is as it was, and what it wrote is deleted (or, if it cannot
    be, unlisted and deleted at the next open)."""

    def __init__(self, what: str, where: str, err: BaseException) -> None:
        reason = spark_error_reason(err)
        self.disk_full = is_disk_full(err)
        if self.disk_full:
            reason = f"the disk is full (No space left on device): {reason}"
        super().__init__(f"{what} could not be written to the store at {where}: {reason}")


def is_disk_full(err: BaseException) -> bool:
    """Whether `err` (an OSError, or a Spark failure whose Java cause says so) is ENOSPC."""
    while err is not None:
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(err):
            return True
        err = err.__cause__  # type: ignore[assignment]
    return False


class Manifest:
    """The manifest of the store on `fs`. `buckets` is what a source entry that does not say
    its bucket count (written before it did) is read with."""

    def __init__(self, fs: StoreFS, buckets: int) -> None:
        self._fs = fs
        self._buckets = buckets

    def read(self) -> Snapshot:
        """The snapshot the manifest on disk lists (version 0 and no source if there is none)."""
        doc = self._fs.read_manifest()
        if doc is None:
            return Snapshot(version=0, sources={})
        sources = {name: self._source(name, entry) for name, entry in doc["sources"].items()}
        return Snapshot(version=int(doc["version"]), sources=sources)

    def _source(self, name: str, entry: dict[str, Any]) -> SourceState:
        layout = entry.get("layout", {})
        parts = []
        for part_name in entry["parts"]:
            info = layout.get(part_name)
            parts.append(self._legacy_part(name, part_name) if info is None else _part(part_name, info))
        cluster = entry.get("cluster")
        return SourceState(
            schema=tuple((str(a), str(t)) for a, t in entry["schema"]),
            parts=tuple(parts),
            cluster=None if cluster is None else tuple(cluster),
            buckets=int(entry.get("buckets", self._buckets)),
        )

    def _legacy_part(self, source: str, name: str) -> Part:
        """A part written before parts were bucketed: one folder of Parquet files, no
        `_bucket` column (read as null), every file read by every fetch."""
        folder = part_folder(self._fs, source, name)
        files = sorted(
            f.name
            for f in self._fs.list_dir(folder)
            if f.name.endswith(".parquet") and not f.name.startswith(".")
        )
        epochs = [int(x) for x in name[len(PART_PREFIX) :].split("-")[:2]]
        return Part(name, (), 1, tuple((0, f) for f in files), (epochs[0], epochs[1]), None, False)

    def write(self, snapshot: Snapshot) -> None:
        """Replace the manifest with one that lists `snapshot`, atomically and durably."""
        self._fs.write_manifest(
            {
                "version": snapshot.version,
                "sources": {name: _source_doc(state) for name, state in snapshot.sources.items()},
            }
        )

    def remove_strays(self, snapshot: Snapshot) -> None:
        """Delete part and temporary folders `snapshot` (the manifest's) does not list
        (crashed flushes and compactions, and parts a compaction replaced)."""
        fs = self._fs
        root = fs.list_dir(fs.root)
        for entry in root:
            if entry.name.startswith(TMP_PREFIX) and not entry.is_dir:
                fs.delete_file(fs.join(fs.root, entry.name))
        folders = {entry.name for entry in root if entry.is_dir}
        for name, state in snapshot.sources.items():
            if name not in folders:
                continue
            folder = fs.join(fs.root, name)
            listed = {part.name for part in state.parts}
            for entry in fs.list_dir(folder):
                stray = entry.name.startswith(TMP_PREFIX) or (
                    entry.name.startswith(PART_PREFIX) and entry.name not in listed
                )
                if stray and entry.is_dir:
                    fs.delete_tree(fs.join(folder, entry.name))


def _part(name: str, info: dict[str, Any]) -> Part:
    return Part(
        name=name,
        cluster=tuple(info["cluster"]),
        buckets=int(info["buckets"]),
        files=tuple((int(b), str(f)) for b, f in info["files"]),
        epochs=(int(info["epochs"][0]), int(info["epochs"][1])),
        rows=None if info["rows"] is None else int(info["rows"]),
        compacted=bool(info["compacted"]),
        # A compacted part written before the mark was recorded holds inserts only.
        inserts_only=bool(info.get("inserts_only", info["compacted"])),
    )


def _part_doc(part: Part) -> dict[str, Any]:
    return {
        "cluster": list(part.cluster),
        "buckets": part.buckets,
        "files": [[b, f] for b, f in part.files],
        "epochs": list(part.epochs),
        "rows": part.rows,
        "compacted": part.compacted,
        "inserts_only": part.inserts_only,
    }


def _source_doc(state: SourceState) -> dict[str, Any]:
    return {
        "schema": [list(p) for p in state.schema],
        "cluster": None if state.cluster is None else list(state.cluster),
        "buckets": state.buckets,
        "parts": [part.name for part in state.parts],
        "layout": {part.name: _part_doc(part) for part in state.parts},
    }
