"""How the vote workload would scale past one pomoview server: a simulation, with costs
measured on this machine (SCALING.md explains the designs it models).

    .venv/bin/python bench/scaling_sim.py              # the table, from the costs recorded below (~20 s)
    .venv/bin/python bench/scaling_sim.py --measure    # measure the costs again first (~1 min)

Costs (`Costs`, measured by `measure()` through a real `pomoview serve`, local[2], on a
temporary data folder with 2,000 articles and 50,000 votes flushed to Parquet):
- `miss_seconds`: a cold lookup's wall time (median of 40): its keyed Spark jobs over
  Parquet, one per round and source, and the fill; `jobs_per_miss` of them;
- `miss_cpu`: the server process's CPU (user + system, /proc) per cold lookup, the Spark
  JVM's not counted;
- `miss_spark_cpu`: the Spark JVM's CPU per cold lookup (its driver and, in local mode,
  its executor: the model charges all of it to the shared cluster, which overstates the
  cluster's share, since each server's driver plans its own jobs);
- `hit_seconds`, `hit_cpu`: a warm lookup's wall time (median of 3,000, one key per RPC),
  and the server's CPU per warm lookup;
- `apply_cpu`: the server's CPU per vote written to a key in state (batches of 500, to the
  40 warm keys): the write path, the log and the apply.
The server is one Python process, its work under one lock and the GIL: one core at most.

Model: Noria's vote workload, article ids Zipf(1.08) over 100,000 articles for reads and
votes alike, 95% reads and 5% votes (Noria's default mix), each server holding at most
`cache_keys` keys (LRU, as the memory budget evicts). For `n` servers, two layouts:
- replicas: every server applies every vote to the keys it holds (the shared log), reads go
  to any replica (uniformly), so each holds the same hot keys as one server alone;
- shards: article id modulo n picks the server, for reads and votes alike.
A Monte Carlo run sends 1,500,000 operations through real LRU caches (one per server) and,
after the first third (which fills them), counts each server's hits, misses and votes that
met a held key; the costs turn the counts
into each server's CPU per second of load. The highest load the layout takes is where its
busiest server reaches one core (or the Spark cluster's `spark_cores` are busy with the
misses' jobs, if that comes first); latency is read at half that load: each lookup's hit or miss time, its
server-side CPU share stretched by an M/M/1 queue at that server's utilization.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pomoview.server.spark.session import descendants  # noqa: E402
from tests.e2e.server_process import VOTES, ServerProcess, wait_for_flush  # noqa: E402


@dataclass(frozen=True)
class Costs:
    """Seconds; measured by `measure()` on this machine (2 cores, 2026-11-26)."""

    miss_seconds: float = 0.230
    jobs_per_miss: float = 2.0
    miss_cpu: float = 0.01625
    miss_spark_cpu: float = 0.2425
    hit_seconds: float = 0.000456
    hit_cpu: float = 0.000273
    apply_cpu: float = 0.0000095


@dataclass(frozen=True)
class Workload:
    articles: int = 100_000
    zipf: float = 1.08
    read_share: float = 0.95
    cache_keys: int = 10_000  # keys one server holds (10% of the articles)
    spark_cores: int = 16  # the shared Spark cluster's executor cores
    operations: int = 1_500_000
    seed: int = 22


@dataclass
class Layout:
    """One simulated layout: per server, hits, misses and votes applied to held keys."""

    name: str
    servers: int
    hits: np.ndarray
    misses: np.ndarray
    applied: np.ndarray
    reads: int
    votes: int


def simulate(workload: Workload, servers: int, layout: str) -> Layout:
    """The counts of `servers` servers in `layout` ("replicas" or "shards")."""
    if layout == "replicas" and servers > 1:
        # A replica gets a random 1/n of the reads: independent draws of the same Zipf law,
        # so its LRU cache holds what one server's holds (simulated with 1/n of the reads,
        # it would only look colder for want of operations). Each applies every vote.
        one = _simulate(workload, 1, "shards")
        share = np.full(servers, 1 / servers)
        return Layout(
            layout, servers, one.hits[0] * share, one.misses[0] * share, np.full(servers, one.applied[0]),
            one.reads, one.votes,
        )
    return _simulate(workload, servers, layout)


def _simulate(workload: Workload, servers: int, layout: str) -> Layout:
    rng = np.random.default_rng(workload.seed)
    ranks = np.arange(1, workload.articles + 1, dtype=np.float64)
    cdf = np.cumsum(ranks**-workload.zipf)
    cdf /= cdf[-1]
    keys = np.searchsorted(cdf, rng.random(workload.operations), side="right") + 1
    is_read = rng.random(workload.operations) < workload.read_share
    replica = rng.integers(0, servers, workload.operations)
    caches: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(servers)]
    hits = np.zeros(servers, dtype=np.int64)
    misses = np.zeros(servers, dtype=np.int64)
    applied = np.zeros(servers, dtype=np.int64)
    warm = workload.operations // 3  # the caches fill first; counted: the rest
    stream = zip(keys.tolist(), is_read.tolist(), replica.tolist(), strict=True)
    for i, (key, read, pick) in enumerate(stream):
        counted = i >= warm
        owners = [key % servers] if layout == "shards" else None
        if read:
            s = owners[0] if owners else pick
            cache = caches[s]
            if key in cache:
                cache.move_to_end(key)
                hits[s] += counted
            else:
                misses[s] += counted
                cache[key] = None
                if len(cache) > workload.cache_keys:
                    cache.popitem(last=False)
        elif counted:  # a vote: applied where its key is held (elsewhere, dropped at the missing key)
            for s in owners if owners else range(servers):
                if key in caches[s]:
                    applied[s] += 1
    reads = int(is_read[warm:].sum())
    return Layout(layout, servers, hits, misses, applied, reads, workload.operations - warm - reads)


@dataclass
class Row:
    layout: str
    servers: int
    hit_ratio: float
    max_ops: float
    bound: str
    skew: float
    spark_jobs: float
    p50_ms: float
    p99_ms: float
    max_votes: float


def evaluate(sim: Layout, costs: Costs, workload: Workload) -> Row:
    ops = sim.reads + sim.votes
    # Each server's CPU seconds per operation of the whole workload.
    cpu = (sim.hits * costs.hit_cpu + sim.misses * costs.miss_cpu + sim.applied * costs.apply_cpu) / ops
    cpu_bound = 1.0 / cpu.max()
    miss_per_op = sim.misses.sum() / ops
    # The Spark cluster's CPU: each miss's jobs cost `miss_spark_cpu` (driver and executor).
    spark_bound = workload.spark_cores / (miss_per_op * costs.miss_spark_cpu)
    max_ops = min(cpu_bound, spark_bound)
    load = max_ops / 2
    util = np.minimum(cpu * load, 0.99)
    latencies = []
    for s in range(sim.servers):
        stretch = 1 / (1 - util[s])  # M/M/1: the server-side share of each lookup waits this much more
        hit = costs.hit_seconds + costs.hit_cpu * (stretch - 1)
        miss = costs.miss_seconds + costs.miss_cpu * (stretch - 1)
        latencies.append((hit, int(sim.hits[s])))
        latencies.append((miss, int(sim.misses[s])))
    return Row(
        sim.name,
        sim.servers,
        float(sim.hits.sum() / sim.reads),
        max_ops,
        "server CPU" if cpu_bound <= spark_bound else "Spark CPU",
        float(cpu.max() / cpu.mean()),
        miss_per_op * costs.jobs_per_miss * max_ops,
        _weighted_percentile(latencies, 0.5) * 1e3,
        _weighted_percentile(latencies, 0.99) * 1e3,
        # Votes alone: the busiest server's apply CPU per vote of the workload.
        1.0 / max(float((sim.applied * costs.apply_cpu).max()) / sim.votes, 1e-12),
    )


def _weighted_percentile(values: list[tuple[float, int]], q: float) -> float:
    values = sorted(v for v in values if v[1] > 0)
    total = sum(n for _, n in values)
    seen = 0
    for value, n in values:
        seen += n
        if seen >= q * total:
            return value
    return values[-1][0]


def measure() -> Costs:
    """The costs, through a real server on this machine (see the module's docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", program=VOTES, flush_interval=1.0).start()
        assert server.process is not None
        pid = server.process.pid
        try:
            with server.client() as db:
                rng = np.random.default_rng(1)
                db.write("article", insert=[{"id": i, "title": f"article {i}"} for i in range(1, 2001)])
                path = Path(tmp) / "votes.csv"
                with open(path, "w", newline="") as f:
                    writer = csv.writer(f)
                    writer.writerow(["article_id", "user_id"])
                    writer.writerows(zip(rng.integers(1, 2001, 50_000).tolist(), range(50_000), strict=True))
                wait_for_flush(db, db.load("vote", path)[1])
                for key in range(1900, 1910):  # warm the JVM's and Spark's code paths
                    db.lookup("articleWithVotes", {"id": key})
                cold_keys = list(range(1, 41))
                jobs = db.stats()["spark_jobs"]
                jvms = [c for c in descendants(pid) if b"java" in Path(f"/proc/{c}/cmdline").read_bytes()]
                cpu, spark_cpu = _cpu_seconds(pid), sum(map(_cpu_seconds, jvms))
                cold = [_timed(lambda k=k: db.lookup("articleWithVotes", {"id": k})) for k in cold_keys]
                miss_cpu = (_cpu_seconds(pid) - cpu) / len(cold_keys)
                miss_spark_cpu = (sum(map(_cpu_seconds, jvms)) - spark_cpu) / len(cold_keys)
                jobs_per_miss = (db.stats()["spark_jobs"] - jobs) / len(cold_keys)  # type: ignore[operator]
                cpu = _cpu_seconds(pid)
                warm = [_timed(lambda k=k: db.lookup("articleWithVotes", {"id": k})) for k in cold_keys * 75]
                hit_cpu = (_cpu_seconds(pid) - cpu) / len(warm)
                cpu = _cpu_seconds(pid)
                for batch in range(40):
                    votes = [
                        {"article_id": cold_keys[j % 40], "user_id": 10**6 + batch * 500 + j}
                        for j in range(500)
                    ]
                    epoch = db.write("vote", insert=votes)
                db.lookup("articleWithVotes", {"id": 1}, min_epoch=epoch)  # every batch applied
                apply_cpu = (_cpu_seconds(pid) - cpu) / 20_000
        finally:
            server.stop()
    return Costs(
        miss_seconds=statistics.median(cold),
        jobs_per_miss=jobs_per_miss,
        miss_cpu=miss_cpu,
        miss_spark_cpu=miss_spark_cpu,
        hit_seconds=statistics.median(warm),
        hit_cpu=hit_cpu,
        apply_cpu=apply_cpu,
    )


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process `pid` so far (its children not counted)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def table(costs: Costs, workload: Workload) -> str:
    lines = [
        "costs: " + ", ".join(f"{k} {v:.6g}" for k, v in asdict(costs).items()),
        f"workload: {workload.articles:,} articles, Zipf {workload.zipf}, {workload.read_share:.0%} reads, "
        f"{workload.cache_keys:,} keys per server, {workload.spark_cores} Spark cores",
        f"{'layout':<9}{'servers':>8}{'hit %':>8}{'max ops/s':>11}{'bound':>13}{'busiest/mean':>14}"
        f"{'Spark jobs/s':>14}{'p50 ms':>8}{'p99 ms':>8}{'max votes/s':>13}",
    ]
    for servers in (1, 4, 16):
        for layout in ("replicas", "shards") if servers > 1 else ("one",):
            sim = simulate(workload, servers, "shards" if layout == "one" else layout)
            row = evaluate(sim, costs, workload)
            lines.append(
                f"{layout:<9}{servers:>8}{row.hit_ratio * 100:>8.1f}{row.max_ops:>11,.0f}{row.bound:>13}"
                f"{row.skew:>14.2f}{row.spark_jobs:>14.1f}{row.p50_ms:>8.2f}{row.p99_ms:>8.1f}"
                f"{row.max_votes:>13,.0f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--measure", action="store_true", help="measure the costs on this machine first")
    parser.add_argument("--operations", type=int, default=Workload.operations)
    parser.add_argument("--cache-keys", type=int, default=Workload.cache_keys, help="keys one server holds")
    parser.add_argument("--spark-cores", type=int, default=Workload.spark_cores, help="the shared cluster's")
    args = parser.parse_args(argv)
    costs = measure() if args.measure else Costs()
    workload = Workload(operations=args.operations, cache_keys=args.cache_keys, spark_cores=args.spark_cores)
    print(table(costs, workload))


if __name__ == "__main__":
    main()
