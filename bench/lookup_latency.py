"""Cold and warm lookup latency of the vote example, through the real server.

    .venv/bin/python bench/lookup_latency.py [--articles 1000] [--votes 20000] [--cold 40] [--warm 2000]

Starts `pomoview serve` on a temporary data folder, loads articles and votes,
waits until they are flushed to Parquet, then times:
- cold lookups: keys no reader holds yet; each is an upquery, answered by
  keyed Spark jobs over Parquet plus the log tail;
- warm lookups: the same keys again, answered from the reader's state, alone and
  while another client keeps sending cold lookups (whose Spark jobs then run);
- the peer: a bare gRPC round trip (Describe) to the same server, in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.server_process import VOTES, ServerProcess, wait_for_flush  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--articles", type=int, default=1000)
    parser.add_argument("--votes", type=int, default=20000)
    parser.add_argument("--cold", type=int, default=40)
    parser.add_argument("--warm", type=int, default=2000)
    args = parser.parse_args()
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", program=VOTES, flush_interval=1.0).start()
        try:
            with server.client() as db:
                db.write("article", insert=[{"id": i, "title": f"article {i}"} for i in range(args.articles)])
                epoch = 0
                for start in range(0, args.votes, 1000):
                    batch = [
                        {"article_id": rng.randrange(args.articles), "user_id": start + j}
                        for j in range(1000)
                    ]
                    epoch = db.write("vote", insert=batch)
                wait_for_flush(db, epoch)
                # Warm up the JVM's and Spark's code paths on keys the measurement does not use.
                for key in range(args.cold, args.cold + 5):
                    db.lookup("articleWithVotes", {"id": key})
                keys = list(range(args.cold))
                cold = []
                for key in keys:
                    t0 = time.perf_counter()
                    db.lookup("articleWithVotes", {"id": key})
                    cold.append(time.perf_counter() - t0)
                warm = []
                for i in range(args.warm):
                    key = keys[i % len(keys)]
                    t0 = time.perf_counter()
                    db.lookup("articleWithVotes", {"id": key})
                    warm.append(time.perf_counter() - t0)
                # Warm lookups while another client keeps missing (its Spark jobs run meanwhile).
                stop = threading.Event()

                def cold_load() -> None:
                    with server.client() as other:
                        key = args.articles // 2
                        while not stop.is_set() and key < args.articles:
                            other.lookup("articleWithVotes", {"id": key})
                            key += 1

                loader = threading.Thread(target=cold_load)
                loader.start()
                time.sleep(0.5)
                warm_under_load = []
                for i in range(args.warm):
                    key = keys[i % len(keys)]
                    t0 = time.perf_counter()
                    db.lookup("articleWithVotes", {"id": key})
                    warm_under_load.append(time.perf_counter() - t0)
                stop.set()
                loader.join()
                peer = []
                for _ in range(args.warm):
                    t0 = time.perf_counter()
                    db.describe()
                    peer.append(time.perf_counter() - t0)
                stats = db.stats()
        finally:
            server.stop()
    print(f"vote example: {args.articles} articles, {args.votes} votes, flushed to Parquet")
    print(f"{'lookup':<28}{'n':>6}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'vs peer p50':>13}")
    peer_p50 = _percentile(peer, 0.5)
    for name, values in (
        ("cold (upquery via Spark)", cold),
        ("warm (reader state)", warm),
        ("warm, during cold upqueries", warm_under_load),
        ("peer: bare gRPC Describe", peer),
    ):
        p50 = _percentile(values, 0.5)
        print(
            f"{name:<28}{len(values):>6}{p50 * 1e3:>10.2f}{_percentile(values, 0.99) * 1e3:>10.2f}"
            f"{statistics.mean(values) * 1e3:>10.2f}{p50 / peer_p50:>12.1f}x"
        )
    print(f"server: {stats['upqueries']} upqueries, {stats['spark_jobs']} Spark jobs")


if __name__ == "__main__":
    main()
