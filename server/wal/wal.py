"""The write-ahead log: every acknowledged write batch, durable before it is acknowledged.

On disk the log is a folder of segment files ``wal-<first_epoch:020d>.log``. A segment is a
sequence of records, each ``<II`` (payload length, CRC32 of payload) followed by the payload,
UTF-8 JSON of one `LoggedBatch`::

    {"e": epoch, "c": {source: {"i": [tuple, ...], "d": [tuple, ...]}}}

JSON keeps int, float (``repr`` round-trips exactly, ``Infinity``/``NaN`` included), str and
bool apart by itself; bytes are tagged as ``{"b": base64}``, which cannot be confused with
another value since no other value is a JSON object.

Appends use group commit: records submitted while a write is in progress queue up, and the
next writer to find the file idle (the leader) writes every queued record with one write and
one fsync, then acknowledges them all. Records enter the queue in epoch order and leave it in
the same order, so epochs strictly increase through the file.

Only the tail of the last segment may be torn: a record is acknowledged only after the fsync
of its group, and groups are written one after another, so everything before the group being
written when the process died was complete and durable before that group began. A bad record
anywhere else is corruption of acknowledged data and recovery refuses to guess
(`WalCorruption`).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import logging
import re
import struct
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pomoview.planner.frontend.values import BadValue, coerce
from pomoview.server.disk.fileio import OS_FILES, FileIO, LogFile
from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_, Value

log = logging.getLogger("pomoview.wal")

_HEADER = struct.Struct("<II")
_SEGMENT_RE = re.compile(r"^wal-(\d{20})\.log$")
# A record longer than this is not a real record but a corrupt length field; refusing it
# avoids trying to allocate gigabytes while recovering.
_MAX_RECORD = 1 << 30


class WalCorruption(Exception):
    """The log holds damage that a crash during an append cannot explain."""


class WalUnusable(OSError):
    """An earlier write failed and could not be undone; the log refuses appends until restart."""


# Called by the thread that made a record durable, once per record, in log order.
OnDurable = Callable[[LoggedBatch], None]


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


def encode_record(batch: LoggedBatch) -> bytes:
    """The bytes of a batch as one log record: header (length, CRC32) and payload."""
    payload = encode_batch(batch)
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _decode_value(raw: Any, type_name: str, where: str) -> Value:
    """A logged value as a value of its attribute's type (values.coerce), bytes untagged;
    WalCorruption if it does not fit. The log gives back what it was given: a CID's text was
    checked before it was logged, and NaN, which the service refuses, is kept if logged."""
    value = raw
    if type_name == "bytes" and type(raw) is dict and set(raw) == {"b"}:
        value = base64.b64decode(raw["b"], validate=True)
    try:
        return coerce(value, type_name, where, check_cid=False, allow_nan=True)
    except BadValue:
        raise WalCorruption(f"{where}: value {raw!r} does not fit type {type_name}") from None


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
        # No record is empty, so a zero length is not a record but the zero-filled tail some
        # file systems leave after a crash (whose CRC of nothing would pass as 0).
        if length == 0 or length > _MAX_RECORD or end > len(data):
            break
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            break
        payloads.append(payload)
        pos = end
    return payloads, pos


@dataclass(eq=False)
class _Pending:
    """One submitted record, queued until a leader writes it."""

    batch: LoggedBatch
    record: bytes
    on_durable: OnDurable | None
    done: bool = False
    error: OSError | None = None


class Commit:
    """A record handed to the log by `WriteAheadLog.submit`; `wait` returns once it is durable."""

    def __init__(self, wal: WriteAheadLog, pending: _Pending) -> None:
        self._wal = wal
        self._pending = pending

    @property
    def epoch(self) -> int:
        return self._pending.batch.epoch

    def wait(self) -> None:
        """Blocks until the record is written and fsynced, or raises the OSError that kept it
        out of the log (`WalUnusable` if the log refuses every append until restart)."""
        self._wal._wait(self._pending)


class WriteAheadLog:
    """A segmented, checksummed, fsynced log of `LoggedBatch` records in one folder.

    Call `recover` once before appending. Every method is thread-safe. After recovery, appends
    go to a fresh segment. Every file operation goes through `files` (tests pass a layer that
    simulates power cuts).
    """

    def __init__(
        self,
        directory: Path,
        on_fsync: Callable[[float], None] | None = None,
        files: FileIO = OS_FILES,
    ) -> None:
        self._dir = Path(directory)
        self._files = files
        # Told the seconds each group commit's fsync took (metrics), without the log's lock.
        self._on_fsync = on_fsync
        # Guards everything below. The leader releases it while it writes and fsyncs, so that
        # other writers can queue the next group meanwhile; `_flushing` keeps everything that
        # touches the active segment out until the leader is back.
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Pending] = []  # submitted, not yet taken by a leader; epoch order
        self._flushing = False
        self._segments: list[_Segment] = []  # oldest first; the last may be the active one
        self._fd: LogFile | None = None  # the active (last) segment, open
        self._size = 0  # bytes of complete, durable records in the active segment
        self._last_epoch = 0  # highest durable epoch
        self._last_submitted = 0  # highest epoch durable, queued or being written
        self._recovered = False
        self._broken: OSError | None = None

    @property
    def last_epoch(self) -> int:
        """The highest epoch made durable or recovered; 0 if none.

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
        with self._cond:
            if self._recovered:
                raise RuntimeError("recover() may be called only once")
            files = self._files
            files.makedirs_durably(self._dir)
            found: list[tuple[int, Path]] = []
            for entry in files.list_dir(self._dir):
                m = _SEGMENT_RE.match(entry.name)
                if m and not entry.is_dir:
                    found.append((int(m.group(1)), self._dir / entry.name))
            found.sort()
            batches: list[LoggedBatch] = []
            removed_any = False
            for index, (first_epoch, path) in enumerate(found):
                is_last = index == len(found) - 1
                data = files.read_bytes(path)
                payloads, valid_end = _read_records(data)
                if valid_end < len(data):
                    if not is_last:
                        raise WalCorruption(
                            f"{path.name}: damaged record at byte {valid_end} in a segment "
                            "that is not the last"
                        )
                    # A torn tail was never acknowledged; cut it so it cannot be read later
                    # as the prefix of something else.
                    f = files.open_existing(path)
                    try:
                        f.truncate(valid_end)
                        f.fsync()
                    finally:
                        f.close()
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
                    files.unlink(path)
                    removed_any = True
                else:
                    self._segments.append(segment)
            if removed_any:
                files.fsync_path(self._dir)
            self._last_submitted = self._last_epoch
            self._recovered = True
            return batches

    def submit(self, batch: LoggedBatch, on_durable: OnDurable | None = None) -> Commit:
        """Queue a batch for the next group commit; `Commit.wait` makes it durable.

        Epochs must be submitted in increasing order: the caller assigns an epoch and submits
        it under one lock of its own, and the log holds records in submission order. Raises
        ValueError for an epoch that does not exceed every epoch submitted and not refused,
        and TypeError for a value that cannot be logged (nothing is queued then).

        `on_durable(batch)` runs once the record is durable, before any waiter returns, on
        the thread that wrote it, in log order, with the log's lock held: it must be quick
        and must not call back into the log.
        """
        pending = _Pending(batch, encode_record(batch), on_durable)
        with self._cond:
            if not self._recovered:
                raise RuntimeError("recover() must be called before appending")
            self._raise_if_broken()
            if batch.epoch <= self._last_submitted:
                raise ValueError(
                    f"epoch {batch.epoch} does not follow the last submitted epoch {self._last_submitted}"
                )
            self._last_submitted = batch.epoch
            self._queue.append(pending)
        return Commit(self, pending)

    def append(self, batch: LoggedBatch) -> None:
        """Durably append a batch: it is written and fsynced when this returns.

        Raises as `submit` and `Commit.wait` do. After an OSError the record is absent: the
        segment is truncated back to its last durable record (a torn record could otherwise
        sit in the middle of the log once later records follow it). If even the truncation
        fails, the log refuses further appends until the process restarts and recovers.
        """
        self.submit(batch).wait()

    def _wait(self, pending: _Pending) -> None:
        with self._cond:
            while not pending.done:
                if self._flushing:
                    self._cond.wait()
                else:
                    self._commit_group()
        if pending.error is not None:
            # Every waiter of a failed group gets its own exception object: one shared object
            # raised in several threads at once would have its traceback rewritten under it.
            err = pending.error
            cls = WalUnusable if isinstance(err, WalUnusable) else OSError
            raise cls(err.errno, err.strerror if err.strerror is not None else str(err)) from err

    def _commit_group(self) -> None:
        """Write and fsync every queued record, then settle them. Called with the lock held,
        which it releases during the I/O."""
        group, self._queue = self._queue, []
        if not group:
            return
        self._flushing = True
        error: OSError | None = None
        try:
            epochs = [p.batch.epoch for p in group]
            assert all(a < b for a, b in zip([self._last_epoch, *epochs], epochs, strict=False)), (
                f"epoch order must be log order: {self._last_epoch} then {epochs}"
            )
            if self._broken is not None:
                error = self._unusable()
            else:
                try:
                    if self._fd is None:
                        self._open_segment(epochs[0])
                except OSError as exc:
                    error = exc
            if error is None:
                assert self._fd is not None
                fd = self._fd
                data = b"".join(p.record for p in group)
                self._cond.release()
                try:
                    fd.write(data)
                    started = time.perf_counter()
                    fd.fsync()
                except OSError as exc:
                    error = exc
                else:
                    self._report_fsync(time.perf_counter() - started)
                finally:
                    self._cond.acquire()
                if error is not None:
                    self._undo_partial(fd, error)
                else:
                    self._size += len(data)
                    self._segments[-1].last_epoch = epochs[-1]
                    self._last_epoch = epochs[-1]
                    for p in group:
                        if p.on_durable is not None:
                            try:
                                p.on_durable(p.batch)
                            except Exception:  # the record is durable: its writer is still acknowledged
                                log.exception("on_durable failed for epoch %d", p.batch.epoch)
                        p.done = True
        except BaseException as exc:
            # Not an I/O error of the log (an interrupt, a bug): whether the bytes are in the
            # file is unknown, so nothing may follow them.
            self._broken = OSError(errno.EIO, f"interrupted while writing: {exc!r}")
            error = self._broken
            raise
        finally:
            if error is not None:
                for p in group:
                    if not p.done:  # a record settled as durable stays acknowledged
                        p.error = error
                        p.done = True
                # The refused epochs may be submitted again, unless later ones are queued.
                self._last_submitted = max([self._last_epoch] + [p.batch.epoch for p in self._queue])
            self._flushing = False
            self._cond.notify_all()

    def _report_fsync(self, seconds: float) -> None:
        if self._on_fsync is not None:
            try:
                self._on_fsync(seconds)
            except Exception:  # the records are durable: a failing observer must not undo that
                log.exception("reporting a write-ahead log fsync failed")

    def _raise_if_broken(self) -> None:
        if self._broken is not None:
            raise self._unusable()

    def _unusable(self) -> WalUnusable:
        assert self._broken is not None
        return WalUnusable(
            self._broken.errno or errno.EIO,
            f"the write-ahead log is unusable after an earlier failure ({self._broken}); "
            "restart the server to recover it",
        )

    def _open_segment(self, first_epoch: int) -> None:
        path = self._dir / _segment_name(first_epoch)
        fd = self._files.create(path)
        try:
            self._files.fsync_path(self._dir)
        except OSError:
            fd.close()
            with contextlib.suppress(FileNotFoundError):
                self._files.unlink(path)
            raise
        self._fd = fd
        self._size = 0
        self._segments.append(_Segment(path=path, first_epoch=first_epoch, last_epoch=0))

    def _undo_partial(self, fd: LogFile, cause: OSError) -> None:
        """Cut the segment back to its durable records after a failed group write."""
        try:
            fd.truncate(self._size)
            fd.fsync()
            if self._size == 0:
                # The segment is named after the refused group's first epoch; the next group
                # may start at a later epoch, and recovery wants a segment's first record to
                # carry its name. Start afresh.
                self._close_active()
                self._files.unlink(self._segments.pop().path)
        except OSError:
            # Whatever reached the disk fails its CRC or is short, so recovery drops it; but
            # a later record behind it would make it look like mid-log damage.
            self._broken = cause

    def _wait_idle(self) -> None:
        while self._flushing:
            self._cond.wait()

    def rotate(self) -> None:
        """Close the active segment; the next group starts a new one."""
        with self._cond:
            self._wait_idle()
            self._close_active()

    def _close_active(self) -> None:
        if self._fd is not None:
            self._fd.close()
            self._fd = None
            self._size = 0

    def truncate_through(self, epoch: int) -> None:
        """Delete whole segments whose every record has an epoch <= `epoch`.

        The active segment is kept whatever its epochs; `rotate` first to let it go.
        """
        with self._cond:
            self._wait_idle()
            active = self._segments[-1] if self._fd is not None else None
            keep: list[_Segment] = []
            removed_any = False
            for segment in self._segments:
                if segment is not active and segment.last_epoch <= epoch:
                    with contextlib.suppress(FileNotFoundError):
                        self._files.unlink(segment.path)
                    removed_any = True
                else:
                    keep.append(segment)
            self._segments = keep
            if removed_any:
                self._files.fsync_path(self._dir)

    def close(self) -> None:
        """Close the active segment's file. Appending afterwards opens a new segment."""
        with self._cond:
            self._wait_idle()
            self._close_active()

    def segment_paths(self) -> list[Path]:
        """The segment files, oldest first (for tests and stats)."""
        with self._cond:
            return [segment.path for segment in self._segments]
