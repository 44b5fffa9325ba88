"""The write-ahead log: every acknowledged write batch, durable before it is acknowledged.

On disk the log is a folder of segment files ``wal-<first_epoch:020d>.log``. A segment is a
sequence of records, each ``<II`` (payload length, CRC32 of payload) followed by the payload,
UTF-8 JSON of one `LoggedBatch`::

    {"e": epoch, "c": {source: {"i": [tuple, ...], "d": [tuple, ...]}}}

JSON keeps int, float (``repr`` round-trips exactly, ``Infinity``/``NaN`` included), str and
bool apart by itself; bytes are tagged as ``{"b": base64}``, which cannot be confused with
another value since no other value is a JSON object.

Only the tail of the last segment may be torn: a record is acknowledged only after its fsync,
and appends are serial, so everything before the last record was complete and durable before
it began. A bad record anywhere else is corruption of acknowledged data and recovery refuses
to guess (`WalCorruption`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fsync import fsync_path
from .types import LoggedBatch, SourceChange, SourceSchema, Tuple_, Value

_HEADER = struct.Struct("<II")
_SEGMENT_RE = re.compile(r"^wal-(\d{20})\.log$")
# A record longer than this is not a real record but a corrupt length field; refusing it
# avoids trying to allocate gigabytes while recovering.
_MAX_RECORD = 1 << 30


class WalCorruption(Exception):
    """The log holds damage that a crash during an append cannot explain."""


@dataclass
class _Segment:
    path: Path
    first_epoch: int
    last_epoch: int  # 0 while the segment holds no record


def _segment_name(first_epoch: int) -> str:
    return f"wal-{first_epoch:020d}.log"


def _json_default(obj: object) -> object:
    if isinstance(obj, bytes):
        return {"b": base64.b64encode(obj).decode("ascii")}
    raise TypeError(f"cannot log a value of type {type(obj).__name__}: {obj!r}")


def encode_batch(batch: LoggedBatch) -> bytes:
    """The record payload of a batch. Raises TypeError for a value that is not a `Value`."""
    doc = {
        "e": batch.epoch,
        "c": {
            name: {"i": list(change.inserts), "d": list(change.deletes)}
            for name, change in batch.changes.items()
        },
    }
    return json.dumps(doc, default=_json_default, separators=(",", ":")).encode("utf-8")


def _decode_value(raw: Any, type_name: str, where: str) -> Value:
    match type_name:
        case "int" if type(raw) is int:
            return raw
        case "float" if type(raw) is float:
            return raw
        case "float" if type(raw) is int:
            # A float attribute written as a whole number; the value is the same.
            return float(raw)
        case "string" if type(raw) is str:
            return raw
        case "bool" if type(raw) is bool:
            return raw
        case "bytes" if type(raw) is dict and set(raw) == {"b"}:
            return base64.b64decode(raw["b"], validate=True)
    raise WalCorruption(f"{where}: value {raw!r} does not fit type {type_name}")


def _decode_tuples(raw: Any, schema: SourceSchema, where: str) -> tuple[Tuple_, ...]:
    if type(raw) is not list:
        raise WalCorruption(f"{where}: expected a list of tuples")
    out: list[Tuple_] = []
    for row in raw:
        if type(row) is not list or len(row) != len(schema):
            raise WalCorruption(f"{where}: tuple {row!r} does not have {len(schema)} attributes")
        out.append(
            tuple(
                _decode_value(v, type_name, f"{where}, attribute {attr!r}")
                for v, (attr, type_name) in zip(row, schema, strict=True)
            )
        )
    return tuple(out)


def decode_batch(payload: bytes, schemas: Mapping[str, SourceSchema]) -> LoggedBatch:
    """Inverse of `encode_batch`, checking every value against its source's schema.

    Raises `WalCorruption` for a payload that is not a batch this module wrote.
    """
    try:
        return _decode_doc(json.loads(payload.decode("utf-8")), schemas)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise WalCorruption(f"undecodable log record: {exc!r}") from exc


def _decode_doc(doc: Any, schemas: Mapping[str, SourceSchema]) -> LoggedBatch:
    epoch = doc["e"]
    if type(epoch) is not int or epoch < 1:
        raise WalCorruption(f"log record with epoch {epoch!r}")
    changes: dict[str, SourceChange] = {}
    for name, change in doc["c"].items():
        where = f"log record of epoch {epoch}, source {name!r}"
        if name not in schemas:
            raise WalCorruption(f"{where}: the source is not declared")
        schema = schemas[name]
        changes[name] = SourceChange(
            inserts=_decode_tuples(change["i"], schema, where),
            deletes=_decode_tuples(change["d"], schema, where),
        )
    return LoggedBatch(epoch=epoch, changes=changes)


def _read_records(data: bytes) -> tuple[list[bytes], int]:
    """Split a segment into valid record payloads; also return where the valid prefix ends."""
    payloads: list[bytes] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, pos)
        start = pos + _HEADER.size
        end = start + length
        if length > _MAX_RECORD or end > len(data):
            break
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            break
        payloads.append(payload)
        pos = end
    return payloads, pos


class WriteAheadLog:
    """A segmented, checksummed, fsynced log of `LoggedBatch` records in one folder.

    Call `recover` once before `append`. `append`, `rotate` and `truncate_through` are
    thread-safe. After recovery, appends go to a fresh segment.
    """

    def __init__(self, directory: Path) -> None:
        self._dir = Path(directory)
        # One lock serializes appends, rotation and truncation. Group commit would encode
        # outside it (already so) and let one writer fsync for the records queued behind it.
        self._lock = threading.Lock()
        self._segments: list[_Segment] = []  # oldest first; the last may be the active one
        self._fd: int | None = None  # open descriptor of the active (last) segment
        self._size = 0  # bytes of complete records in the active segment
        self._last_epoch = 0
        self._recovered = False
        self._broken: OSError | None = None

    @property
    def last_epoch(self) -> int:
        """The highest epoch appended or recovered; 0 if none.

        After `truncate_through` removed every segment and the process restarted, this is 0
        again: the caller keeps its epoch counter at max(store version, last_epoch).
        """
        return self._last_epoch

    def recover(self, schemas: Mapping[str, SourceSchema]) -> list[LoggedBatch]:
        """Read every valid record, oldest first, truncating a torn tail of the last segment.

        `schemas` must name every source the log may mention. Raises `WalCorruption` for a
        damaged record anywhere but the tail of the last segment, for epochs that do not
        increase, or for values that do not fit their schema.
        """
        with self._lock:
            if self._recovered:
                raise RuntimeError("recover() may be called only once")
            self._dir.mkdir(parents=True, exist_ok=True)
            found: list[tuple[int, Path]] = []
            for entry in self._dir.iterdir():
                m = _SEGMENT_RE.match(entry.name)
                if m:
                    found.append((int(m.group(1)), entry))
            found.sort()
            batches: list[LoggedBatch] = []
            removed_any = False
            for index, (first_epoch, path) in enumerate(found):
                is_last = index == len(found) - 1
                data = path.read_bytes()
                payloads, valid_end = _read_records(data)
                if valid_end < len(data):
                    if not is_last:
                        raise WalCorruption(
                            f"{path.name}: damaged record at byte {valid_end} in a segment "
                            "that is not the last"
                        )
                    # A torn tail was never acknowledged; cut it so it cannot be read later
                    # as the prefix of something else.
                    with open(path, "r+b") as f:
                        f.truncate(valid_end)
                        f.flush()
                        os.fsync(f.fileno())
                segment = _Segment(path=path, first_epoch=first_epoch, last_epoch=0)
                for payload in payloads:
                    batch = decode_batch(payload, schemas)
                    if batch.epoch <= self._last_epoch:
                        raise WalCorruption(
                            f"{path.name}: epoch {batch.epoch} follows epoch {self._last_epoch}"
                        )
                    if segment.last_epoch == 0 and batch.epoch != first_epoch:
                        raise WalCorruption(f"{path.name}: first record has epoch {batch.epoch}")
                    segment.last_epoch = batch.epoch
                    self._last_epoch = batch.epoch
                    batches.append(batch)
                if segment.last_epoch == 0:
                    # Empty (crashed before its first record was complete): nothing to keep.
                    path.unlink()
                    removed_any = True
                else:
                    self._segments.append(segment)
            if removed_any:
                fsync_path(self._dir)
            self._recovered = True
            return batches

    def append(self, batch: LoggedBatch) -> None:
        """Durably append a batch: it is written and fsynced when this returns.

        Raises ValueError if the epoch does not exceed `last_epoch`, TypeError for a value
        that cannot be logged (nothing is written then), and OSError as the file system
        raises it; after an OSError the record is absent (truncated back, or left with a
        failing CRC at the tail). If even the truncation fails, the log refuses further
        appends until the process restarts and recovers.
        """
        payload = encode_batch(batch)
        record = _HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            if not self._recovered:
                raise RuntimeError("recover() must be called before append()")
            if self._broken is not None:
                raise OSError(
                    f"the write-ahead log is unusable after an earlier failure: {self._broken}"
                )
            if batch.epoch <= self._last_epoch:
                raise ValueError(
                    f"epoch {batch.epoch} does not follow the last logged epoch {self._last_epoch}"
                )
            if self._fd is None:
                self._open_segment(batch.epoch)
            assert self._fd is not None
            fd = self._fd
            try:
                view = memoryview(record)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            except OSError as exc:
                self._undo_partial(fd, exc)
                raise
            self._size += len(record)
            self._segments[-1].last_epoch = batch.epoch
            self._last_epoch = batch.epoch

    def _open_segment(self, first_epoch: int) -> None:
        path = self._dir / _segment_name(first_epoch)
        if self._segments and self._segments[-1].last_epoch == 0:
            # An earlier append failed in a then-new segment that stayed empty; the caller may
            # retry with the same epoch, which needs the same name.
            self._segments.pop().path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fsync_path(self._dir)
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._fd = fd
        self._size = 0
        self._segments.append(_Segment(path=path, first_epoch=first_epoch, last_epoch=0))

    def _undo_partial(self, fd: int, cause: OSError) -> None:
        try:
            os.ftruncate(fd, self._size)
            os.fsync(fd)
        except OSError:
            # Whatever reached the disk fails its CRC or is short, so recovery drops it; but
            # a later record behind it would make it look like mid-log damage.
            self._broken = cause

    def rotate(self) -> None:
        """Close the active segment; the next append starts a new one."""
        with self._lock:
            self._close_active()

    def _close_active(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._size = 0

    def truncate_through(self, epoch: int) -> None:
        """Delete whole segments whose every record has an epoch <= `epoch`.

        The active segment is kept whatever its epochs; `rotate` first to let it go.
        """
        with self._lock:
            active = self._segments[-1] if self._fd is not None else None
            keep: list[_Segment] = []
            removed_any = False
            for segment in self._segments:
                if segment is not active and segment.last_epoch <= epoch:
                    segment.path.unlink(missing_ok=True)
                    removed_any = True
                else:
                    keep.append(segment)
            self._segments = keep
            if removed_any:
                fsync_path(self._dir)

    def close(self) -> None:
        """Close the active segment's file. Appending afterwards opens a new segment."""
        with self._lock:
            self._close_active()

    def segment_paths(self) -> list[Path]:
        """The segment files, oldest first (for tests and stats)."""
        with self._lock:
            return [segment.path for segment in self._segments]
