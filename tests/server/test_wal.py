"""The write-ahead log: exact round trips, torn tails, failed appends, segments, group commit."""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.server.types import LoggedBatch, SourceChange, SourceSchema, Tuple_
from pomoview.server.wal import wal as wal_module
from pomoview.server.wal.wal import Commit, WalCorruption, WriteAheadLog

from .conftest import fill

ALL: SourceSchema = (("i", "int"), ("f", "float"), ("s", "string"), ("b", "bool"), ("y", "bytes"))
PAIR: SourceSchema = (("k", "int"), ("v", "string"))
SCHEMAS = {"all": ALL, "pair": PAIR}


def canon(batches: list[LoggedBatch]) -> list[object]:
    """A form that tells 1 from 1.0 from True, -0.0 from 0.0, and matches NaN with NaN."""
    return [
        (
            b.epoch,
            {
                name: tuple(
                    tuple(tuple((type(v).__name__, repr(v)) for v in t) for t in ts)
                    for ts in (c.inserts, c.deletes)
                )
                for name, c in b.changes.items()
            },
        )
        for b in batches
    ]


def batch(epoch: int, k: int) -> LoggedBatch:
    return LoggedBatch(epoch, {"pair": SourceChange(((k, f"v{k}"),), ())})


def open_log(directory: Path) -> tuple[WriteAheadLog, list[LoggedBatch]]:
    log = WriteAheadLog(directory)
    return log, log.recover(SCHEMAS)


def test_round_trip_of_every_type(tmp_path: Path) -> None:
    rows: tuple[Tuple_, ...] = (
        (0, 0.1, "", True, b""),
        (2**63 - 1, 1e300, 'é 😀 \u0000 \n "q" \\', False, bytes(range(256))),
        (-(2**63), -0.0, "\ud800 lone surrogate", True, b"\x00"),
        (7, float("inf"), "plain", False, b'{"b": 1}'),
        (8, float("-inf"), "x", True, b"\xff"),
        (9, 5e-324, "y", False, b"1"),
        (10, 1.0, "1", True, b"true"),
        (11, float("nan"), "z", False, b"z"),
    )
    batches = [
        LoggedBatch(1, {"all": SourceChange(rows[:4], rows[4:])}),
        LoggedBatch(2, {"all": SourceChange((), rows[:1]), "pair": SourceChange(((1, "a"),), ())}),
        LoggedBatch(5, {}),
    ]
    log, recovered = open_log(tmp_path)
    assert recovered == [] and log.last_epoch == 0
    for b in batches:
        log.append(b)
    assert log.last_epoch == 5
    log.close()
    again, recovered = open_log(tmp_path)
    assert canon(recovered) == canon(batches)
    assert again.last_epoch == 5


def test_whole_number_in_a_float_attribute_recovers_as_float(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    log.append(LoggedBatch(1, {"all": SourceChange(((1, 3, "s", True, b""),), ())}))
    _, recovered = open_log(tmp_path)
    value = recovered[0].changes["all"].inserts[0][1]
    assert type(value) is float and value == 3.0


values = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.booleans(),
    st.binary(max_size=40),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(values, max_size=4), st.lists(values, max_size=4)), max_size=5))
def test_round_trip_property(
    tmp_path_factory: pytest.TempPathFactory,
    changes: list[tuple[list[Tuple_], list[Tuple_]]],
) -> None:
    directory = tmp_path_factory.mktemp("wal")
    batches = [
        LoggedBatch(e + 1, {"all": SourceChange(tuple(ins), tuple(dels))})
        for e, (ins, dels) in enumerate(changes)
    ]
    log, _ = open_log(directory)
    for b in batches:
        log.append(b)
    log.close()
    _, recovered = open_log(directory)
    assert canon(recovered) == canon(batches)


def test_torn_or_corrupt_last_record_vanishes_at_every_offset(tmp_path: Path) -> None:
    source = tmp_path / "source"
    log, _ = open_log(source)
    log.append(batch(1, 1))
    log.append(batch(2, 2))
    (segment,) = log.segment_paths()
    good_end = segment.stat().st_size
    log.append(LoggedBatch(3, {"all": SourceChange(((3, 0.5, "é", True, b"\x01\x02"),), ())}))
    log.close()
    full = segment.read_bytes()
    assert len(full) > good_end

    def check(damaged: bytes, case: str) -> None:
        directory = tmp_path / case
        shutil.copytree(source, directory)
        (directory / segment.name).write_bytes(damaged)
        log, recovered = open_log(directory)
        assert [b.epoch for b in recovered] == [1, 2], case
        assert log.last_epoch == 2
        assert (directory / segment.name).stat().st_size == good_end, "torn tail not truncated"
        log.append(batch(3, 33))
        log.close()
        _, recovered = open_log(directory)
        assert [(b.epoch, b.changes["pair"].inserts) for b in recovered] == [
            (1, ((1, "v1"),)),
            (2, ((2, "v2"),)),
            (3, ((33, "v33"),)),
        ], case
        shutil.rmtree(directory)

    for cut in range(good_end, len(full)):
        check(full[:cut], f"cut-{cut}")
    for flip in range(good_end, len(full), 3):
        damaged = bytearray(full)
        damaged[flip] ^= 0x40
        check(bytes(damaged), f"flip-{flip}")
    # After a crash some file systems leave the file longer, zero-filled past the last write;
    # a zero header's CRC of nothing is 0, so it would pass as an empty record.
    for zeros in (8, 100):
        check(full[:good_end] + bytes(zeros), f"zeros-{zeros}")


def test_damage_before_the_last_segment_is_refused(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))
    log.append(batch(2, 2))
    log.rotate()
    log.append(batch(3, 3))
    log.close()
    first = log.segment_paths()[0]
    first.write_bytes(first.read_bytes()[:-1])
    with pytest.raises(WalCorruption, match="not the last"):
        open_log(tmp_path)


def test_unknown_source_on_recovery_is_refused(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))
    log.close()
    with pytest.raises(WalCorruption, match="pair"):
        WriteAheadLog(tmp_path).recover({"all": ALL})


def test_epochs_strictly_increase(tmp_path: Path) -> None:
    log = WriteAheadLog(tmp_path)
    with pytest.raises(RuntimeError):
        log.append(batch(1, 1))
    log.recover(SCHEMAS)
    log.append(batch(1, 1))
    with pytest.raises(ValueError):
        log.append(batch(1, 2))
    with pytest.raises(ValueError):
        log.append(batch(0, 2))
    log.append(batch(4, 4))  # gaps are allowed
    with pytest.raises(ValueError):
        log.append(batch(3, 3))
    assert log.last_epoch == 4
    log.close()
    log, recovered = open_log(tmp_path)
    assert [b.epoch for b in recovered] == [1, 4]
    with pytest.raises(ValueError):
        log.append(batch(4, 5))
    log.append(batch(5, 5))


def test_an_unloggable_value_writes_nothing(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    with pytest.raises(TypeError):
        log.append(LoggedBatch(1, {"pair": SourceChange(((1, object()),), ())}))  # type: ignore[arg-type]
    log.append(batch(1, 1))
    log.close()
    assert [b.epoch for b in open_log(tmp_path)[1]] == [1]


@pytest.mark.parametrize("failure", ["short-write", "fsync"])
def test_failed_append_leaves_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))
    real_write, real_fsync = os.write, os.fsync

    def half_write(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    if failure == "short-write":
        monkeypatch.setattr(os, "write", half_write)
    else:
        # the append's fsync fails; the undo path's fsync succeeds
        calls = iter([failing_fsync, real_fsync])
        monkeypatch.setattr(os, "fsync", lambda fd: next(calls)(fd))
    with pytest.raises(OSError):
        log.append(batch(2, 2))
    monkeypatch.setattr(os, "write", real_write)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert log.last_epoch == 1
    log.append(batch(2, 22))  # the caller may retry the refused epoch
    log.close()
    _, recovered = open_log(tmp_path)
    assert [(b.epoch, b.changes["pair"].inserts[0][0]) for b in recovered] == [(1, 1), (2, 22)]


def test_failed_undo_makes_the_log_refuse_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        log.append(batch(2, 2))
    monkeypatch.undo()
    with pytest.raises(OSError, match="unusable"):
        log.append(batch(2, 2))
    log.close()
    # The record reached the file but its fsync failed; recovery may keep it, since it is
    # complete and checksummed, but nothing after it exists.
    _, recovered = open_log(tmp_path)
    assert [b.epoch for b in recovered][:1] == [1] and len(recovered) <= 2


def test_rotate_and_truncate_through(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))
    log.append(batch(2, 2))
    log.rotate()
    log.rotate()  # a second rotation with nothing appended is a no-op
    log.append(batch(3, 3))
    log.append(batch(4, 4))
    log.rotate()
    log.append(batch(5, 5))
    names = [p.name for p in log.segment_paths()]
    assert names == [f"wal-{e:020d}.log" for e in (1, 3, 5)]
    assert sorted(p.name for p in tmp_path.iterdir()) == names

    log.truncate_through(3)  # the second segment still holds epoch 4
    assert [p.name for p in log.segment_paths()] == names[1:]
    log.truncate_through(100)  # never the active segment
    assert [p.name for p in log.segment_paths()] == names[2:]
    assert sorted(p.name for p in tmp_path.iterdir()) == names[2:]
    log.append(batch(6, 6))
    log.close()

    log, recovered = open_log(tmp_path)
    assert [b.epoch for b in recovered] == [5, 6]
    assert log.last_epoch == 6
    log.append(batch(7, 7))  # after recovery, appends go to a new segment
    assert [p.name for p in log.segment_paths()] == [names[2], f"wal-{7:020d}.log"]
    log.rotate()
    log.truncate_through(7)
    assert log.segment_paths() == [] and list(tmp_path.iterdir()) == []
    log.append(batch(8, 8))
    log.close()
    assert [b.epoch for b in open_log(tmp_path)[1]] == [8]


def test_empty_segment_left_by_a_crash_is_removed(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))
    log.close()
    (tmp_path / f"wal-{2:020d}.log").write_bytes(b"\x05\x00")  # a torn first record
    (tmp_path / "unrelated.txt").write_text("kept")
    log, recovered = open_log(tmp_path)
    assert [b.epoch for b in recovered] == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unrelated.txt", f"wal-{1:020d}.log"]
    log.append(batch(2, 2))
    log.close()
    assert [b.epoch for b in open_log(tmp_path)[1]] == [1, 2]


def test_concurrent_appends_share_fsyncs_and_every_ack_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers assign epochs and submit under one lock, and wait for durability outside it.

    Every fsync of a segment takes a picture of the file right after it returns: that is what
    a crash at that moment would leave. A writer, once acknowledged, must find its record in
    the latest picture; and the writers together must have needed fewer fsyncs than records.
    """
    log, _ = open_log(tmp_path)
    real_fsync = os.fsync
    pictures: list[bytes] = []
    pictures_lock = threading.Lock()

    def recording_fsync(fd: int) -> None:
        real_fsync(fd)
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if path.name.startswith("wal-"):
            image = path.read_bytes()
            with pictures_lock:
                pictures.append(image)
            # A disk's fsync takes a while; the writers that arrive meanwhile form the next group.
            time.sleep(0.002)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    threads, per_thread = 8, 40
    submit_lock = threading.Lock()
    last_epoch = [0]
    acks: list[tuple[int, int]] = []  # (epoch, pictures taken when it was acknowledged)
    durable_order: list[int] = []
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(per_thread):
                with submit_lock:
                    last_epoch[0] += 1
                    commit = log.submit(
                        batch(last_epoch[0], w * 1000 + i), lambda b: durable_order.append(b.epoch)
                    )
                commit.wait()
                with pictures_lock:
                    acks.append((commit.epoch, len(pictures)))
        except BaseException as err:
            errors.append(err)

    workers = [threading.Thread(target=writer, args=(w,)) for w in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    monkeypatch.undo()
    assert not errors, errors
    appends = threads * per_thread
    assert len(acks) == appends
    assert len(pictures) <= appends // 2, f"{len(pictures)} fsyncs for {appends} appends"

    in_picture: dict[int, set[int]] = {}
    for epoch, seen in acks:
        assert seen > 0, f"epoch {epoch} acknowledged before any fsync"
        if seen not in in_picture:
            payloads, _ = wal_module._read_records(pictures[seen - 1])
            in_picture[seen] = {json.loads(p)["e"] for p in payloads}
        assert epoch in in_picture[seen], f"epoch {epoch} acknowledged before it was durable"

    assert durable_order == list(range(1, appends + 1))
    log.close()
    _, recovered = open_log(tmp_path)
    assert [b.epoch for b in recovered] == list(range(1, appends + 1))
    keys = {b.epoch: b.changes["pair"].inserts[0][0] for b in recovered}
    assert sorted(keys.values()) == sorted(w * 1000 + i for w in range(threads) for i in range(per_thread))


def test_submitting_out_of_epoch_order_is_refused(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path)
    first = log.submit(batch(1, 1))
    second = log.submit(batch(3, 3))
    with pytest.raises(ValueError):
        log.submit(batch(2, 2))  # queued behind 3, it would break epoch order in the file
    second.wait()  # the leader writes both, in order
    first.wait()
    log.close()
    assert [b.epoch for b in open_log(tmp_path)[1]] == [1, 3]


def big_batch(epoch: int) -> LoggedBatch:
    """About 12 KB: more than a page, so a write into a full file system gets cut short."""
    return LoggedBatch(epoch, {"pair": SourceChange(tuple((k, "x" * 100) for k in range(100)), ())})


def wait_fails(commit: Commit, code: int) -> None:
    with pytest.raises(OSError) as info:
        commit.wait()
    assert info.value.errno == code, info.value


@pytest.mark.parametrize("segment", ["same", "fresh"])
def test_full_disk_refuses_the_whole_group_and_leaves_no_trace(
    tmp_path: Path, tiny_fs: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch, segment: str
) -> None:
    """A real ENOSPC from a tmpfs: the refused group leaves the file as it was, its every
    writer gets the error, and once space is free later appends (with a gap in the epochs)
    are recovered.

    "fresh": the refused group is the first in a new segment, named after its first epoch;
    the group after it starts at another epoch and needs its own segment.
    """
    fs = tiny_fs(tmp_path / "fs")
    log, _ = open_log(fs / "wal")
    log.append(batch(1, 1))
    log.append(batch(2, 2))
    if segment == "fresh":
        log.rotate()
    sizes = {p.name: p.stat().st_size for p in log.segment_paths()}
    filler = fill(fs)
    real_write = os.write
    short_writes: list[int] = []

    def spying_write(fd: int, data: bytes | memoryview) -> int:
        written = real_write(fd, data)
        if written < len(data):
            short_writes.append(written)
        return written

    monkeypatch.setattr(os, "write", spying_write)
    commits = [log.submit(big_batch(e)) for e in (3, 4, 5)]
    wait_fails(commits[0], errno.ENOSPC)  # this writer leads, for the group of all three
    filler.unlink()  # a writer that was left out of the refusal would now succeed
    wait_fails(commits[1], errno.ENOSPC)
    wait_fails(commits[2], errno.ENOSPC)
    monkeypatch.undo()
    if segment == "same":
        assert short_writes, "the record should have been cut short by the full disk"
    assert {p.name: p.stat().st_size for p in log.segment_paths()} == sizes
    assert sorted(p.name for p in (fs / "wal").iterdir()) == sorted(sizes)
    assert log.last_epoch == 2

    log.append(big_batch(7))  # epochs 3..6 are skipped
    log.append(batch(8, 8))
    log.close()
    _, recovered = open_log(fs / "wal")
    assert [b.epoch for b in recovered] == [1, 2, 7, 8]
    assert recovered[2] == big_batch(7)


def test_every_writer_of_a_failed_group_gets_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same as on a full tmpfs, with the failure injected, for machines that cannot mount."""
    log, _ = open_log(tmp_path)
    log.append(batch(1, 1))
    real_write = os.write

    def half_write(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_write)
    commits = [log.submit(batch(e, e)) for e in (2, 3, 4)]
    wait_fails(commits[0], errno.ENOSPC)
    monkeypatch.undo()
    wait_fails(commits[1], errno.ENOSPC)
    wait_fails(commits[2], errno.ENOSPC)
    log.append(batch(4, 44))  # nothing is queued behind it, so the last refused epoch may be reused
    log.close()
    _, recovered = open_log(tmp_path)
    assert [(b.epoch, b.changes["pair"].inserts[0][0]) for b in recovered] == [(1, 1), (4, 44)]
