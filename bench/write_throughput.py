"""Durable write throughput, acknowledgment latency and write -> visible latency, through
the real server, on Noria's vote workload.

    .venv/bin/python bench/write_throughput.py [--seconds 5] [--writers 1,4] [--batch 1000]
        [--forms columns,rows] [--reps 2] [--preload 2000000] [--load-reps 2] [--no-peer]
        [--load-only] [--dir /tmp] [--server-arg=--hit-replica ...]

Starts `pomoview serve` on a temporary data folder (under --dir) with examples/votes.pomo,
writes `--articles` articles, bulk-loads `--preload` votes from a Parquet file (`pomoview
load`, timed: the bulk-load table, `--load-reps` loads of the same file), and warms the
view `articleWithVotes` on `--warm` articles. Then for each wire form of a write
(`columns`: the client's default, typed columns per attribute; `rows`: a map of Value
messages per row) and each writer count, that many client threads, each with its own
connection, write `--batch`-vote batches for `--seconds`, timing every write from the call
to the acknowledgment (the server acknowledges once the batch is fsynced in its write-ahead
log; concurrent writers share fsyncs). The votes go to every article, warm or not, with
user ids never repeated.

The peer, in the same run and the same folder: one thread appending the same encoded log
records (`wal.encode_record`) to a file and fsyncing after each one. fsync latency on a
shared disk drifts, so the loop runs for `--seconds` right before each writer row, and
that row's ratio is against the loop's tuples/s of the same minute. Rows run `--reps`
times, alternating (A B A B ...), and the table shows medians.

Write -> visible: one writer writes one vote for a warm article and looks it up with
`min_epoch` (read-your-writes), timing the pair; p50 and p99 over `--visible` samples.

The bulk load's peer, in the same run: a hand-written Spark job in the benchmark's process (a
local session configured as the server's) that reads the same Parquet file and writes it as
Parquet, the floor of one pass over the input (it neither types, buckets, sorts nor fsyncs).
Loads and copies alternate (A B A B ...); the table shows medians and the ratio of rows/s.
`--load-only` stops after the loads.

The flusher (the Spark job moving the log into Parquet) is held off by a long
--flush-interval, so the numbers are those of the write path alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pomoview.client import Client, messages  # noqa: E402
from pomoview.server.types import LoggedBatch, SourceChange  # noqa: E402
from pomoview.server.wal.wal import encode_record  # noqa: E402
from tests.e2e.server_process import VOTES, ServerProcess  # noqa: E402

VIEW = "articleWithVotes"


def _votes(writer: int, seq: int, size: int, articles: int) -> list[tuple[int, int]]:
    """One batch's (article_id, user_id); user ids never repeat, so no insert is a no-op."""
    base = writer * 1_000_000_000 + seq * size
    return [((base + j) % articles + 1, base + j) for j in range(size)]


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


def _write(db: Client, rows: list[dict[str, object]], form: str) -> int:
    """One batch in the given wire form; `columns` is what `Client.write` sends."""
    if form == "columns":
        return db.write("vote", insert=rows)
    request = messages.write_request({"vote": (rows, ())}, columnar=False)
    return db._call(db._stub.Write, request).epoch  # noqa: SLF001 (the row form, on purpose)


def run_writers(
    address: str, form: str, writers: int, seconds: float, size: int, offset: int, articles: int
) -> tuple[int, float, list[float]]:
    """`writers` threads writing for `seconds`; returns (tuples written, elapsed s, latencies s).
    The client's encoding is inside the timed span: it is part of a write's cost."""
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
                rows: list[dict[str, object]] = [
                    {"article_id": a, "user_id": u} for a, u in _votes(offset + w, seq, size, articles)
                ]
                t0 = time.perf_counter()
                _write(db, rows, form)
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


def run_bare_loop(folder: Path, seconds: float, size: int, articles: int) -> tuple[int, float]:
    """Append + fsync of pre-encoded log records, one fsync per record, single-threaded."""
    changes = [{"vote": SourceChange(tuple(_votes(999, seq, size, articles)), ())} for seq in range(64)]
    records = [encode_record(LoggedBatch(seq + 1, c)) for seq, c in enumerate(changes)]
    path = folder / "bare-append.log"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t_start = time.perf_counter()
        deadline = t_start + seconds
        n = 0
        while time.perf_counter() < deadline:
            view = memoryview(records[n % len(records)])
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            n += 1
        elapsed = time.perf_counter() - t_start
    finally:
        os.close(fd)
        path.unlink()
    return n * size, elapsed


def run_visible(address: str, samples: int, warm: int, offset: int) -> list[float]:
    """Write one vote for a warm article, then read it back with min_epoch; seconds per pair."""
    out = []
    with Client(address, timeout=60.0) as db:
        for i in range(samples):
            article = i % warm + 1
            t0 = time.perf_counter()
            epoch = db.write("vote", insert=[{"article_id": article, "user_id": offset + i}])
            db.lookup(VIEW, {"id": article}, min_epoch=epoch)
            out.append(time.perf_counter() - t0)
    return out


def _load_once(db: Client, path: Path) -> tuple[int, float, str]:
    """One `pomoview load` of `path`: (rows, seconds, its phases' spans)."""
    phases: dict[str, float] = {}  # the load's phase -> when it was first reported

    def progress(report: dict[str, object]) -> None:
        phases.setdefault(str(report["phase"]), time.perf_counter())

    t0 = time.perf_counter()
    rows, _ = db.load("vote", path, timeout=3600, progress=progress)
    t1 = time.perf_counter()
    starts = sorted((t, p) for p, t in phases.items()) + [(t1, "")]
    spans = [f"{p} {b - a:.1f} s" for (a, p), (b, _) in zip(starts, starts[1:], strict=False)]
    return rows, t1 - t0, ", ".join(spans)


class CopyPeer:
    """The floor of one pass: a hand-written Spark job in this process (a local session set up
    as the server's) that reads the Parquet file and writes it as Parquet, nothing else."""

    def __init__(self) -> None:
        from pomoview.server.spark.session import create_spark_session

        self.spark = create_spark_session("local[*]")

    def copy(self, path: Path, out: Path) -> float:
        t0 = time.perf_counter()
        self.spark.read.parquet(str(path)).write.mode("overwrite").parquet(str(out))
        return time.perf_counter() - t0

    def stop(self) -> None:
        self.spark.stop()


def preload(
    db: Client, folder: Path, votes: int, articles: int, reps: int, peer: CopyPeer | None
) -> dict[str, object]:
    """Bulk-loads `votes` votes from Parquet `reps` times, alternated (A B A B ...) with the
    peer copying the same file when there is one; returns the medians. A smaller load (and
    copy) first waits for Spark's start and warms its code, which is not the load's cost.
    The file is the same each time: the later loads insert tuples already present, which
    costs a load what the first one did."""
    path = folder / "votes.parquet"
    out = folder / "peer-copy.parquet"
    # The warm-up load is a tenth of the file: a tiny one left the JIT cold for the first run.
    for n in (max(1000, votes // 10), votes):  # user ids below 0: apart from the writers' ones
        ids = np.arange(-n, 0, dtype=np.int64)
        pq.write_table(pa.table({"article_id": ids % articles + 1, "user_id": ids}), path)
        if n != votes:
            db.load("vote", path, timeout=3600)
            if peer is not None:
                peer.copy(path, out)
    loads: list[float] = []
    copies: list[float] = []
    rows = 0
    for rep in range(reps):
        order = ("load", "peer") if rep % 2 == 0 else ("peer", "load")
        for what in order:
            if what == "load":
                rows, seconds, spans = _load_once(db, path)
                loads.append(seconds)
                print(f"bulk load: {rows:,} rows in {seconds:.1f} s; phases: {spans}", flush=True)
            elif peer is not None:
                copies.append(peer.copy(path, out))
                copied = f"{votes:,} rows in {copies[-1]:.1f} s"
                print(f"peer copy (Spark read + write Parquet): {copied}", flush=True)
    path.unlink()
    result: dict[str, object] = {"rows": rows, "load_s": statistics.median(loads), "loads": loads}
    if copies:
        result.update(peer_s=statistics.median(copies), copies=copies)
    return result


def load_table(load: dict[str, object]) -> None:
    rows = int(load["rows"])  # type: ignore[call-overload]
    load_s = float(load["load_s"])  # type: ignore[arg-type]
    runs = len(load["loads"])  # type: ignore[arg-type]
    print(f"bulk load of {rows:,} votes (Parquet), medians of {runs} runs alternated with the peer")
    print()
    print("| job | rows | median s | rows/s | runs s | ratio vs peer |")
    print("|---|---:|---:|---:|---|---:|")
    peer_s = load.get("peer_s")

    def runs_text(key: str) -> str:
        return ", ".join(f"{x:.2f}" for x in load[key])  # type: ignore[attr-defined]

    ratio = f"{(rows / load_s) / (rows / float(peer_s)):.2f}x" if peer_s else ""  # type: ignore[arg-type]
    print(
        f"| `pomoview load` (server) | {rows:,} | {load_s:.2f} | {rows / load_s:,.0f} | "
        f"{runs_text('loads')} | {ratio} |"
    )
    if peer_s:
        p = float(peer_s)  # type: ignore[arg-type]
        print(
            f"| peer: Spark read + write Parquet | {rows:,} | {p:.2f} | {rows / p:,.0f} | "
            f"{runs_text('copies')} | 1.00x |"
        )
    print()


def drains_text(drains: list[float]) -> str:
    return ", ".join(f"{d:.1f} s" for d in drains)


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    parser.add_argument("--writers", default="1,4", help="comma-separated writer counts")
    parser.add_argument("--forms", default="columns,rows", help="wire forms: columns, rows")
    parser.add_argument("--batch", type=int, default=1000, help="votes per write batch")
    parser.add_argument("--reps", type=int, default=2, help="runs of each row, alternated")
    parser.add_argument("--articles", type=int, default=1000)
    parser.add_argument("--warm", type=int, default=100, help="articles looked up before writing")
    parser.add_argument("--preload", type=int, default=2_000_000, help="votes bulk-loaded first")
    parser.add_argument("--load-reps", type=int, default=2, help="bulk loads, alternated with the peer")
    parser.add_argument("--no-peer", action="store_true", help="no peer copy next to the bulk loads")
    parser.add_argument("--load-only", action="store_true", help="only the bulk loads (and their peer)")
    parser.add_argument("--visible", type=int, default=200, help="write -> visible samples")
    parser.add_argument("--dir", default=None, help="where the temporary data folder goes")
    parser.add_argument("--flush-interval", type=float, default=3600.0)
    parser.add_argument(
        "--server-arg", action="append", default=[], help="a serve flag (--server-arg=--hit-replica)"
    )
    args = parser.parse_args(argv)
    levels = [int(w) for w in args.writers.split(",")]
    forms = args.forms.split(",")
    cases = [(form, writers) for writers in levels for form in forms]
    runs: dict[tuple[str, int], list[tuple[float, list[float], float]]] = {c: [] for c in cases}
    bares: list[tuple[int, float]] = []
    visible: list[float] = []
    drains: list[float] = []  # seconds the dataflow took to catch up after each round
    load_rate = 0.0
    load: dict[str, object] = {}
    peer = None if args.no_peer or not args.preload else CopyPeer()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        server = ServerProcess(
            folder / "data", program=VOTES, flush_interval=args.flush_interval, extra_args=args.server_arg
        ).start()
        try:
            with server.client() as db:
                articles = range(1, args.articles + 1)
                db.write("article", insert=[{"id": i, "title": f"article {i}"} for i in articles])
                if args.preload:
                    load = preload(db, folder, args.preload, args.articles, args.load_reps, peer)
                    load_rate = int(load["rows"]) / float(load["load_s"])  # type: ignore[call-overload,arg-type]
                if peer is not None:
                    peer.stop()
                if args.load_only:
                    load_table(load)
                    return {"load": load, "load_rate": load_rate}
                for i in range(1, args.warm + 1):
                    db.lookup(VIEW, {"id": i})
            # Warm the server's and the client's code paths before anything is timed.
            for form in forms:
                run_writers(server.address, form, 2, 1.0, args.batch, 900, args.articles)
            offset = 1
            for rep in range(args.reps):
                for case in cases if rep % 2 == 0 else cases[::-1]:
                    bare = run_bare_loop(folder, args.seconds, args.batch, args.articles)
                    bares.append(bare)
                    form, writers = case
                    tuples, elapsed, lat = run_writers(
                        server.address, form, writers, args.seconds, args.batch, offset, args.articles
                    )
                    offset += writers
                    runs[case].append((tuples / elapsed, lat, bare[0] / bare[1]))
                # The dataflow applies acknowledged batches behind the writers; the backlog is
                # drained first, so that the latency below is that of one write alone.
                t_drain = time.perf_counter()
                with Client(server.address, timeout=600.0) as db:
                    durable = db.stats()["durable_epoch"]
                    assert isinstance(durable, int)
                    db.lookup(VIEW, {"id": 1}, min_epoch=durable)
                drains.append(time.perf_counter() - t_drain)
                users = 2_000_000_000 + rep * 100_000
                visible += run_visible(server.address, args.visible // args.reps, args.warm, users)
        finally:
            server.stop()
        fs = _fs_type(folder)
    print(
        f"durable writes of {args.batch}-vote batches, {args.seconds:g} s per run, medians of "
        f"{args.reps} alternated runs, {os.cpu_count()} cores, log on {fs}"
    )
    print()
    print(
        "| form | writers | votes/s | p50 ms | p99 ms | ratio vs bare append+fsync loop "
        "| bare loop votes/s, same minute |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    table: dict[str, object] = {}
    for form, writers in cases:
        got = runs[(form, writers)]
        rate = statistics.median(r for r, _, _ in got)
        peer = statistics.median(p for _, _, p in got)
        lat = [x for _, ls, _ in got for x in ls]
        p50, p99 = _percentile(lat, 0.5) * 1e3, _percentile(lat, 0.99) * 1e3
        table[f"{form}/{writers}"] = rate
        print(
            f"| {form} | {writers} | {rate:,.0f} | {p50:.2f} | {p99:.2f} | {rate / peer:.2f}x "
            f"| {peer:,.0f} |"
        )
    bare_rate = sum(b[0] for b in bares) / sum(b[1] for b in bares)
    print(f"| bare append+fsync loop | 1 | {bare_rate:,.0f} | | | 1.00x | |")
    print()
    if args.preload:
        load_table(load)
    print(f"dataflow apply backlog after each round of writer runs, drained in: {drains_text(drains)}")
    print(
        f"write -> visible in a warm view (1 vote, then lookup with min_epoch), {len(visible)} samples: "
        f"p50 {_percentile(visible, 0.5) * 1e3:.2f} ms, p99 {_percentile(visible, 0.99) * 1e3:.2f} ms"
    )
    return {"rates": table, "load_rate": load_rate, "visible_p50": _percentile(visible, 0.5)}


if __name__ == "__main__":
    main()
