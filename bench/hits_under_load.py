"""Reads under write load: Noria's vote workload, warm hits read while votes are written,
through the real server, against peers holding the same rows in the same run.

    .venv/bin/python bench/hits_under_load.py [--scale 1.0] [--window 10] [--windows 4]

Setup (bench/vote.py's Workload, seeded): at scale S, 100,000 x S articles and 2,000,000 x S
votes (article ids bounded Zipf(1.08)), written as Parquet and loaded with `pomoview load`
into a real `pomoview serve` process (examples/votes.pomo, the server's default flush
interval of 5 s); the 2,000 hottest ids (at most half the articles) warmed by lookups.
Two peers on this machine, started here, hold the warm ids' rows: bench/vote_echo.py (the
same Lookup RPC over a dict of map-of-Values rows) and bench/typed_floor.py (a dict of typed
`Row{id, title, votes}` messages: the floor for a Python gRPC server).

Phases; each alternates windows of `--window` s, pomoview then the peer (A B A B ...),
`--windows` per target, and reports the medians over windows:

- idle: `--threads` client threads read warm hits, 1 key per RPC, ids Zipf among the warm
  ones: through `Client.lookup` ("client"), then through the raw gRPC stub with prebuilt
  requests and no decoding ("stub"); against the echo peer;
- busy: the same, while, against pomoview only and for the whole phase (bench/busy_load.py,
  a process of its own): one writer sending `--batch`-vote batches (Zipf ids) with
  `Client.write` as fast as they are acknowledged, one thread of sequential cold misses (ids
  never read before), a subscription to ids 1..10, and `Client.stats()` every 100 ms;
- at rest, batched: after the write backlog is applied, 100 keys per RPC through
  `Client.lookup_many`, against the typed floor's equivalent (same dict of rows back).

Figures: per phase and target, latency p50/p90/p99/p999 and keys/s, and pomoview / peer.
Over the busy phase's measured windows: votes/s acknowledged (the writer's log) and applied
(`stats()`'s applied_epoch over time, each epoch mapped to votes by the writer's log of
(epoch, votes)); the apply lag every 100 ms, in epochs (durable_epoch - applied_epoch) and in
seconds: as the server reports it (`apply_lag_seconds`, the age of its oldest durable batch
not yet applied, at the instant it read the epochs), and from the client's side (the age of
the oldest acknowledged write not yet applied, from the writer's acknowledgment times, at
the start of the `stats()` call, when the server reads the epochs, give or take its wait
for a thread); the subscription's lag
(each change's arrival minus the acknowledgment of the write of its epoch); and the cores
each process took over the busy windows (bench/process_cpu.py: the server, its hit replica,
its Spark JVM, the rest of its tree, the load, this process's readers, the echo peer). Then write ->
visible at rest (1 vote, then a lookup with min_epoch; p50, p99). Last, 50 answers (hot and
cold ids) checked against numpy counts of every vote loaded and written, and the
subscription's folded counts against the writer's log: a mismatch exits non-zero.

Everything runs on 127.0.0.1; every process started is stopped at exit (exceptions and
Ctrl-C too). `--scale 0.01` takes about a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import busy_load  # noqa: E402
import process_cpu  # noqa: E402
from hits_under_load_table import (  # noqa: E402
    QUANTILES,
    SUBSCRIBED,
    busy_figures,
    print_table,
    subscription_mismatches,
)
from reader_window import run_window  # noqa: E402
from typed_floor import FloorClient  # noqa: E402
from vote import VIEW, Echo, Workload, pct  # noqa: E402  (vote puts the repository on sys.path)

from pomoview.client import Client  # noqa: E402
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb  # noqa: E402
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc  # noqa: E402
from tests.e2e.server_process import VOTES, ServerProcess  # noqa: E402

USER_BASE = 2_000_000_000  # the busy writer's user ids (the loaded votes' are below n_votes)
VISIBLE_USERS = 3_000_000_000  # write -> visible's
STARTED = [time.monotonic()]  # reset by main(); progress lines show the time since


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED[0]:6.1f} s] {text}", flush=True)


# -- readers ----------------------------------------------------------------------------------


class Reader:
    """One reader thread's connection and prebuilt calls: `call(i)` sends the i-th RPC (cycling
    over batches of `per_rpc` keys from `ids`), in one of three ways: `client` (Client.lookup, or
    lookup_many), `stub` (the generated stub, prebuilt requests, the answer not decoded) or
    `floor` (typed_floor's FloorClient.lookup_many)."""

    def __init__(self, how: str, address: str, per_rpc: int, ids: np.ndarray) -> None:
        count = 8192 if per_rpc == 1 else 1024
        keys = ids[: count * per_rpc].tolist()
        batches = [keys[i : i + per_rpc] for i in range(0, len(keys), per_rpc)]
        self.args: list[Any]
        self.fn: Callable[[Any], Any]
        self.wait_ready: Callable[[float], None]
        self.close: Callable[[], None]
        if how == "client":
            client = Client(address, timeout=60.0)
            self.wait_ready, self.close = client.wait_ready, client.close
            self.args = [[{"id": k} for k in b] for b in batches]
            if per_rpc == 1:
                self.fn = lambda b: client.lookup(VIEW, b[0])
            else:
                self.fn = lambda b: client.lookup_many(VIEW, b)
        elif how == "stub":
            channel = grpc.insecure_channel(address)
            self.wait_ready = lambda t: grpc.channel_ready_future(channel).result(timeout=t)
            self.close = channel.close
            stub = pb_grpc.ViewServiceStub(channel)
            self.args = [
                pb.LookupRequest(view=VIEW, keys=[pb.Row(fields={"id": pb.Value(int_value=k)}) for k in b])
                for b in batches
            ]
            self.fn = lambda req: stub.Lookup(req, timeout=60.0)
        elif how == "floor":
            floor = FloorClient(address)
            self.wait_ready, self.close = floor.wait_ready, floor.close
            self.args, self.fn = batches, floor.lookup_many
        else:
            raise ValueError(how)

    def call(self, i: int) -> None:
        self.fn(self.args[i % len(self.args)])


def read_window(
    how: str, address: str, keys: list[np.ndarray], per_rpc: int, seconds: float
) -> dict[str, float]:
    """One window: a thread per entry of `keys`, each with its own connection (ready before the
    clock starts), sending RPCs back to back for `seconds`. Keys/s, latency quantiles (s)."""
    window = run_window([Reader(how, address, per_rpc, ids) for ids in keys], seconds)
    every, errors, wall = window.latencies, window.errors, window.wall
    result = {"keys_per_s": len(every) * per_rpc / wall if wall else 0.0, "rpcs": float(len(every))}
    result.update({q: pct(every, f) if every else 0.0 for q, f in QUANTILES.items()})
    result["errors"] = float(len(errors))
    if errors:
        say(f"    {how} {address}: {len(errors)} reader errors, first {errors[0]}")
    return result


def alternate(
    label: str,
    targets: list[tuple[str, str, str]],
    keys: list[np.ndarray],
    per_rpc: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """`targets` ((name, how, address), pomoview first) read in turn, `args.windows` windows
    each (A B A B ...), after an unmeasured half window (at most 1 s) each; the medians per target, and the
    measured span (monotonic) in `_span`."""
    for _, how, address in targets:
        read_window(how, address, keys, per_rpc, min(1.0, args.window / 2))
    windows: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in targets}
    span_start = time.monotonic()
    for _ in range(args.windows):
        for name, how, address in targets:
            windows[name].append(read_window(how, address, keys, per_rpc, args.window))
    span = (span_start, time.monotonic())
    out: dict[str, Any] = {
        name: {k: statistics.median(w[k] for w in ws) for k in ws[0]}
        | {"errors": sum(w["errors"] for w in ws)}
        for name, ws in windows.items()
    }
    lines = []
    for name, ws in windows.items():
        r = out[name]
        r["windows_keys_per_s"] = [w["keys_per_s"] for w in ws]
        each = " ".join(f"{x:,.0f}" for x in r["windows_keys_per_s"])
        lines.append(f"{name} {r['keys_per_s']:,.0f} keys/s, p99 {r['p99'] * 1e3:.2f} ms (windows: {each})")
    say(f"  {label}: " + "; ".join(lines))
    out["_span"] = span
    return out


# -- processes --------------------------------------------------------------------------------


def stop_server(server: ServerProcess) -> None:
    if server.process is None or server.process.poll() is not None:
        return
    try:
        server.stop(timeout=60.0)
    except subprocess.TimeoutExpired:
        server.kill()


class Busy:
    """bench/busy_load.py's process (spawned: no fork of a process with gRPC threads)."""

    def __init__(self, config: busy_load.BusyConfig) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.stop_event, self.ready = ctx.Event(), ctx.Event()
        self.results = ctx.Queue()
        self.process = ctx.Process(
            target=busy_load.run, args=(config, self.stop_event, self.ready, self.results), daemon=True
        )
        self.process.start()

    def wait_ready(self, timeout: float) -> None:
        if not self.ready.wait(timeout):
            raise TimeoutError("the busy load did not start (no acknowledged write or no subscription)")

    def stop(self) -> None:
        self.stop_event.set()

    def logs(self) -> dict[str, Any]:
        """After `stop`: the process's logs, once its subscription has had every change."""
        out: dict[str, Any] = self.results.get(timeout=900.0)
        self.process.join(timeout=30.0)
        return out

    def kill(self) -> None:
        if self.process.is_alive():
            self.stop_event.set()
            self.process.join(timeout=5.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5.0)


def drain(db: Client, limit: float = 600.0) -> float:
    """Seconds until the dataflow has applied every durable epoch (at most `limit`)."""
    started = time.monotonic()
    for _ in range(int(limit / 0.05) + 1):
        stats = db.stats()
        if int(stats["applied_epoch"]) >= int(stats["durable_epoch"]):  # type: ignore[call-overload]
            return time.monotonic() - started
        time.sleep(0.05)
    raise TimeoutError(f"the dataflow did not catch up with the log in {limit:.0f} s")


def visible(db: Client, ids: list[int], samples: int) -> tuple[list[float], np.ndarray]:
    """Write -> visible: 1 vote, then a lookup of its article with min_epoch; s per pair, and
    the votes written per article."""
    times, counts = [], np.zeros(max(ids) + 1, dtype=np.int64)
    for i in range(samples):
        article = ids[i % len(ids)]
        started = time.perf_counter()
        epoch = db.write("vote", insert=[{"article_id": article, "user_id": VISIBLE_USERS + i}])
        db.lookup(VIEW, {"id": article}, min_epoch=epoch)
        times.append(time.perf_counter() - started)
        counts[article] += 1
    return times, counts


# -- the run ----------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument(
        "--window",
        type=float,
        default=None,
        help="seconds per window (10 from scale 1, 5 from 0.1, else 0.5)",
    )
    parser.add_argument("--windows", type=int, default=4, help="windows per target and path, alternated")
    parser.add_argument("--threads", type=int, default=4, help="reader threads")
    parser.add_argument("--batch", type=int, default=1000, help="votes per write of the busy writer")
    parser.add_argument(
        "--visible", type=int, default=None, help="write -> visible samples (100; 20 below 0.1)"
    )
    parser.add_argument(
        "--server-arg", action="append", default=[], help="a serve flag (--server-arg=--max-apply-lag=0.1)"
    )
    args = parser.parse_args(argv)
    if args.window is None:
        args.window = 10.0 if args.scale >= 1 else 5.0 if args.scale >= 0.1 else 0.5
    if args.visible is None:
        args.visible = 100 if args.scale >= 0.1 else 20
    if args.windows < 1 or args.window <= 0:
        parser.error("--windows must be >= 1 and --window > 0")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    STARTED[0] = time.monotonic()
    out: dict[str, Any] = {"scale": args.scale, "loadavg_before": os.getloadavg(), "reads": {}}
    w = Workload(args.scale)
    n = w.n_articles
    warm_n = min(2000, n // 2)
    hot = list(range(1, warm_n + 1))
    # Cold ids: never read before their miss; some for warming the miss path, 25 for the answer
    # check, the rest for the busy phase's misses.
    never_read = list(range(warm_n + 1, n + 1))
    np.random.default_rng(3).shuffle(never_read)
    warm_misses, check_cold, busy_cold = never_read[:3], never_read[3:28], never_read[28:]
    # Reads: Zipf(1.08) over the warm ids' ranks, a sequence of its own per thread.
    hot_cdf = w.cdf[:warm_n] / w.cdf[warm_n - 1]
    rng = np.random.default_rng(7)
    hot_keys = [np.searchsorted(hot_cdf, rng.random(102_400), side="right") + 1 for _ in range(args.threads)]
    say(
        f"workload: {n:,} articles, {w.n_votes:,} votes, {warm_n:,} warm ids; "
        f"load average {' '.join(f'{x:.2f}' for x in out['loadavg_before'])}"
    )

    with tempfile.TemporaryDirectory(prefix="hits-under-load-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        paths = w.write(tmp)
        # The server's default flush interval: the flusher's Spark jobs are part of the load.
        server = ServerProcess(tmp / "data", program=VOTES, flush_interval=5.0, extra_args=args.server_arg)
        stack.callback(stop_server, server)
        server.start()
        say(f"server listening on {server.address}")
        db = stack.enter_context(Client(server.address, timeout=600.0))
        started = time.perf_counter()
        for source in ("article", "vote"):
            db.load(source, paths[source], timeout=3600)
        out["load_s"] = time.perf_counter() - started
        for k in warm_misses:  # the miss path's code (Spark, Arrow), on ids no one reads again
            db.lookup(VIEW, {"id": k})
        for i in range(0, warm_n, 100):
            db.lookup_many(VIEW, [{"id": k} for k in hot[i : i + 100]])
        say(f"loaded in {out['load_s']:.1f} s, {warm_n:,} ids warm")
        rows = [(k, w.title(k), int(w.counts[k])) for k in hot]
        echo = Echo(rows, tmp)
        stack.callback(echo.stop)
        floor = Echo(rows, tmp, script="typed_floor.py")
        stack.callback(floor.stop)
        peers_agree(server.address, echo.address, floor.address, w)
        say(f"echo peer on {echo.address}, typed floor on {floor.address}")

        ours, theirs = ("pomoview", "client", server.address), ("echo", "client", echo.address)
        ours_stub, theirs_stub = ("pomoview", "stub", server.address), ("echo", "stub", echo.address)
        reads = out["reads"]
        reads["idle client"] = alternate("idle, Client.lookup", [ours, theirs], hot_keys, 1, args)
        reads["idle stub"] = alternate("idle, raw stub", [ours_stub, theirs_stub], hot_keys, 1, args)

        busy = Busy(
            busy_load.BusyConfig(
                address=server.address,
                cdf=w.cdf,
                batch=args.batch,
                user_base=USER_BASE,
                cold_ids=busy_cold,
                subscribed=SUBSCRIBED,
                seed=11,
                max_seconds=8 * args.windows * args.window + 600.0,
            )
        )
        stack.callback(busy.kill)
        busy.wait_ready(180.0)
        say("busy load running (writer, cold misses, subscription, stats sampler)")
        time.sleep(args.window)  # the load settles before the first measured window
        assert server.process is not None and busy.process.pid is not None
        processes = (
            server.process.pid,
            {"busy load": busy.process.pid, "bench (readers)": os.getpid(), "echo peer": echo.process.pid},
        )
        cpu_before, cpu_since = process_cpu.snapshot(*processes), time.monotonic()
        reads["busy client"] = alternate("busy, Client.lookup", [ours, theirs], hot_keys, 1, args)
        reads["busy stub"] = alternate("busy, raw stub", [ours_stub, theirs_stub], hot_keys, 1, args)
        cpu = process_cpu.cores(cpu_before, process_cpu.snapshot(*processes), time.monotonic() - cpu_since)
        span = (reads["busy client"]["_span"][0], reads["busy stub"]["_span"][1])
        busy.stop()
        out["drain_s"] = drain(db)
        got = busy.logs()
        logs: busy_load.Logs = got["logs"]
        out["busy"] = busy_figures(logs, span)
        out["busy"]["cpu"] = cpu
        out["errors"] = list(logs.errors)
        say(f"  busy load stopped; the apply backlog drained in {out['drain_s']:.2f} s")

        batched = [("pomoview", "client", server.address), ("typed floor", "floor", floor.address)]
        reads["batched"] = alternate("at rest, 100 keys/RPC", batched, hot_keys, 100, args)

        times, visible_counts = visible(db, hot[:100], args.visible)
        out["visible"] = {"n": len(times), "p50": pct(times, 0.5), "p99": pct(times, 0.99)}
        counts = w.counts.astype(np.int64) + got["counts"][: n + 1]
        counts[: len(visible_counts)] += visible_counts
        out["check"] = check_answers(db, w, counts, hot, check_cold)
        out["check"]["subscription"] = subscription_mismatches(logs, w.counts)
        out["loadavg_after"] = os.getloadavg()
    say("everything started is stopped")
    print_table(out, args)
    failures = out["check"]["wrong"] + out["check"]["subscription"]
    if failures:
        raise AssertionError("answers differ from numpy's counts:\n" + "\n".join(failures[:20]))
    return out


def peers_agree(ours: str, echo: str, floor: str, w: Workload) -> None:
    """The peers answer id 1 as pomoview does (before any write)."""
    with Client(ours) as a, Client(echo) as b:
        assert a.lookup(VIEW, {"id": 1}) == b.lookup(VIEW, {"id": 1}) == w.answer(1)
    f = FloorClient(floor)
    try:
        assert f.lookup_many([1]) == {(1,): w.answer(1)}
    finally:
        f.close()


def check_answers(
    db: Client, w: Workload, counts: np.ndarray, hot: list[int], cold: list[int]
) -> dict[str, Any]:
    """50 ids (id 1, 24 other warm ids, 25 never read) against `counts`, at the last epoch."""
    rng = np.random.default_rng(5)
    ids = [1, *rng.choice(hot[1:], 24, replace=False).tolist(), *cold[:25]]
    epoch = int(db.stats()["durable_epoch"])  # type: ignore[call-overload]
    got = db.lookup_many(VIEW, [{"id": k} for k in ids], min_epoch=epoch)
    wrong = [
        f"id {k}: {got[(k,)]} != {int(counts[k])} votes"
        for k in ids
        if got[(k,)] != [{"id": k, "title": w.title(k), "votes": int(counts[k])}]
    ]
    say(f"checked {len(ids)} answers against numpy: {len(wrong)} wrong")
    return {"ids": len(ids), "hot": 25, "cold": len(ids) - 25, "wrong": wrong}


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # SIGTERM unwinds as Ctrl-C does, so that the servers and peers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
