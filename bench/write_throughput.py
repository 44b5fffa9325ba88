"""Durable write throughput and acknowledgment latency, through the real server.

    .venv/bin/python bench/write_throughput.py [--seconds 5] [--writers 1,4,16] [--batch 100] [--dir /tmp]

Starts `pomoview serve` on a temporary data folder (under --dir), installs a program with one
source of four int/string attributes, then for each writer count runs that many client
threads, each with its own connection, each writing `--batch`-tuple batches for `--seconds`
and timing every `Client.write` from the call to the acknowledgment (the server acknowledges
once the batch is fsynced in its write-ahead log; concurrent writers share fsyncs).

The peer, in the same run and the same folder: one thread that appends the same encoded log
records (`wal.encode_record`: `encode_batch` of equivalent batches, with the record header) to a file
and fsyncs after each one. fsync latency on a shared disk drifts from minute to minute, so
the loop runs for `--seconds` right before each writer row, and that row's ratio is its
tuples/s against the loop's tuples/s of the same minute (shown in the last column). The
bare row sums all of the loop's runs.

The flusher (the Spark job moving the log into Parquet) is held off by a long
--flush-interval, so the numbers are those of the write path alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pomoview.client import Client  # noqa: E402
from pomoview.server.types import LoggedBatch, SourceChange  # noqa: E402
from pomoview.server.wal import encode_record  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402

PROGRAM = """
source event(id: int, user: int, kind: string, note: string).
view eventsByUser(user).
eventsByUser(user: U, id: I, kind: K) :- event(id: I, user: U, kind: K).
"""
KINDS = ("click", "view", "like", "share")


def _rows(writer: int, seq: int, size: int) -> list[tuple[int, int, str, str]]:
    """One batch's tuples, in the source's attribute order; ids never repeat, so no insert
    is a no-op."""
    base = (writer * 1_000_000_000) + seq * size
    return [(base + j, j % 97, KINDS[j % 4], f"note {writer}/{seq}/{j}") for j in range(size)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _fs_type(path: Path) -> str:
    """The file system type of `path`'s mount (from /proc/mounts), since fsync cost depends on it."""
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mount, fs, *_ = line.split()
            if str(path.resolve()).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fs
    except OSError:
        pass
    return kind


def run_writers(
    address: str, writers: int, seconds: float, size: int, offset: int
) -> tuple[int, float, list[float]]:
    """`writers` threads writing for `seconds`; returns (tuples written, elapsed s, latencies s)."""
    latencies: list[list[float]] = [[] for _ in range(writers)]
    counts = [0] * writers
    errors: list[BaseException] = []
    clients = [Client(address, timeout=60.0) for _ in range(writers)]
    start = threading.Barrier(writers + 1)
    deadline = [0.0]

    def writer(w: int) -> None:
        db = clients[w]
        seq = 0
        try:
            start.wait()
            while time.perf_counter() < deadline[0]:
                rows = [
                    {"id": i, "user": u, "kind": k, "note": n} for i, u, k, n in _rows(offset + w, seq, size)
                ]
                t0 = time.perf_counter()
                db.write("event", insert=rows)
                latencies[w].append(time.perf_counter() - t0)
                counts[w] += size
                seq += 1
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    t_start = time.perf_counter()
    deadline[0] = t_start + seconds
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t_start
    for db in clients:
        db.close()
    if errors:
        raise errors[0]
    return sum(counts), elapsed, [x for per in latencies for x in per]


def run_bare_loop(folder: Path, seconds: float, size: int) -> tuple[int, float, list[float]]:
    """Append + fsync of pre-encoded log records, one fsync per record, single-threaded."""
    records = [
        encode_record(LoggedBatch(seq + 1, {"event": SourceChange(tuple(_rows(999, seq, size)), ())}))
        for seq in range(256)
    ]
    path = folder / "bare-append.log"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
    latencies: list[float] = []
    try:
        t_start = time.perf_counter()
        deadline = t_start + seconds
        n = 0
        while time.perf_counter() < deadline:
            record = records[n % len(records)]
            t0 = time.perf_counter()
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            latencies.append(time.perf_counter() - t0)
            n += 1
        elapsed = time.perf_counter() - t_start
    finally:
        os.close(fd)
        path.unlink()
    return n * size, elapsed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    parser.add_argument("--writers", default="1,4,16", help="comma-separated writer counts")
    parser.add_argument("--batch", type=int, default=100, help="tuples per write batch")
    parser.add_argument("--dir", default=None, help="where the temporary data folder goes")
    parser.add_argument("--flush-interval", type=float, default=3600.0)
    args = parser.parse_args()
    levels = [int(w) for w in args.writers.split(",")]
    rows: list[tuple[str, int, float, list[float]]] = []
    bares: list[tuple[int, float, list[float]]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        server = ServerProcess(folder / "data", flush_interval=args.flush_interval).start()
        try:
            with server.client() as db:
                db.install(PROGRAM)
            # Warm the server's and the client's code paths before anything is timed.
            run_writers(server.address, 2, 1.0, args.batch, offset=900)
            for index, writers in enumerate(levels):
                bares.append(run_bare_loop(folder, args.seconds, args.batch))
                tuples, elapsed, latencies = run_writers(
                    server.address, writers, args.seconds, args.batch, offset=(index + 1) * 100
                )
                rows.append((f"{writers}", tuples, elapsed, latencies))
            with server.client() as db:
                stats = db.stats()
        finally:
            server.stop()
        fs = _fs_type(folder)
    bare_tuples = sum(b[0] for b in bares)
    bare_elapsed = sum(b[1] for b in bares)
    bare_latencies = [x for b in bares for x in b[2]]
    print(
        f"durable writes of {args.batch}-tuple batches, {args.seconds:g} s per row, "
        f"{os.cpu_count()} cores, log on {fs}"
    )
    print()
    print(
        "| writers | tuples/s | p50 ms | p99 ms | ratio vs bare append+fsync loop "
        "| bare loop tuples/s, same minute |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    table = [(*row, bare[0] / bare[1]) for row, bare in zip(rows, bares, strict=True)]
    bare_rate = bare_tuples / bare_elapsed
    table.append(("bare append+fsync loop", bare_tuples, bare_elapsed, bare_latencies, bare_rate))
    for name, tuples, elapsed, latencies, peer in table:
        rate = tuples / elapsed
        print(
            f"| {name} | {rate:,.0f} | {_percentile(latencies, 0.5) * 1e3:.2f} "
            f"| {_percentile(latencies, 0.99) * 1e3:.2f} | {rate / peer:.2f}x | {peer:,.0f} |"
        )
    print()
    print(
        f"bare loop: {len(bare_latencies) / bare_elapsed:,.0f} batches/s (one fsync each); "
        f"server: {stats['durable_epoch']} epochs committed"
    )

if __name__ == "__main__":
    main()
