"""The files Spark writes for a part, renamed to the store's layout: `b<bucket>-<i>.parquet`
at the top of the part's folder, everything else (`_SUCCESS`, checksums) dropped."""

from __future__ import annotations

from collections import Counter

from pomoview.server.store.fs import StoreFS
from pomoview.server.store.layout import BUCKET_DIR_COLUMN


def _file_name(bucket: int, i: int) -> str:
    return f"b{bucket:05d}-{i}.parquet"


def flatten_partitions(fs: StoreFS, tmp: str, buckets: int) -> tuple[tuple[int, str], ...]:
    """For a write whose Spark partition i holds bucket i only: each `part-<i>-…` file is
    bucket i's. Returns (bucket, file name) pairs, sorted."""
    files: list[tuple[int, str]] = []
    per_bucket: Counter[int] = Counter()
    for entry in sorted(fs.list_dir(tmp), key=lambda e: e.name):
        path = fs.join(tmp, entry.name)
        if entry.name.endswith(".parquet") and entry.name.startswith("part-"):
            b = int(entry.name.split("-")[1])
            assert 0 <= b < buckets, f"{entry.name}: partition {b} of a part with {buckets} buckets"
            name = _file_name(b, per_bucket[b])
            per_bucket[b] += 1
            fs.rename(path, fs.join(tmp, name))
            files.append((b, name))
        elif entry.is_dir:
            fs.delete_tree(path)
        else:
            fs.delete_file(path)
    return tuple(sorted(files))


def flatten_bucket_dirs(fs: StoreFS, tmp: str) -> tuple[tuple[int, str], ...]:
    """For a write partitioned by `BUCKET_DIR_COLUMN`: the files under `_bucket_dir=<b>/` move
    up as bucket b's. Returns (bucket, file name) pairs, sorted."""
    files: list[tuple[int, str]] = []
    prefix = BUCKET_DIR_COLUMN + "="
    for entry in fs.list_dir(tmp):
        path = fs.join(tmp, entry.name)
        if entry.is_dir and entry.name.startswith(prefix):
            b = int(entry.name[len(prefix) :])
            written = [
                f.name
                for f in fs.list_dir(path)
                if not f.is_dir and f.name.endswith(".parquet") and not f.name.startswith(".")
            ]
            for i, f in enumerate(written):
                name = _file_name(b, i)
                fs.rename(fs.join(path, f), fs.join(tmp, name))
                files.append((b, name))
            fs.delete_tree(path)
        elif not entry.is_dir:
            fs.delete_file(path)
    return tuple(sorted(files))
