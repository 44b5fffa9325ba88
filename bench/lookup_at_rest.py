"""Warm hits at rest against the typed-message floor: 1 and 100 keys per RPC, through the
`Client` and through the raw stub, on a real server.

    .venv/bin/python bench/lookup_at_rest.py [--window 3] [--windows 3] [--threads 4]

Setup: a real `pomoview serve` process (tests/e2e/server_process.py) with examples/votes.pomo,
`--articles` articles and `--votes` votes (article ids bounded Zipf(1.08), seeded) written
through `Client.write` in batches of 5,000, every article id warmed by `lookup_many`. The
peer, started here on the same machine: bench/typed_floor.py (a minimal gRPC dict server of
typed `Row{id, title, votes}` messages, the floor for a Python gRPC server), holding the rows
pomoview answered.

Each phase alternates windows of `--window` s, pomoview then the floor (A B A B ...),
`--windows` per target after an unmeasured half window each, and reports the medians:
`--threads` reader threads, each with its own connection, sending RPCs back to back, ids
Zipf over the warm ones (`--rows-too`: a third target, the same server read in the row form,
as a client before columnar answers). Phases: 1 key per RPC and 100 keys per RPC, each "client"
(`Client.lookup` / `Client.lookup_many` against `FloorClient.lookup_many`, both returning
dicts) and "stub" (the generated stub with the requests the client builds, prebuilt, and the
answer parsed but not decoded into dicts, against the floor's stub alike).

Figures per phase and target: latency p50/p99, keys/s, the server process's CPU per RPC
(its own threads, from /proc; the JVM beside pomoview's is another process and not counted)
and this process's (the readers'), and pomoview / floor in keys/s. The measured windows start
after the first flush of the written rows is over. At the end, 20 answers are checked against
the rows written.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from process_cpu import cpu_seconds  # noqa: E402
from reader_window import run_window  # noqa: E402
from typed_floor import METHOD, FloorClient, M  # noqa: E402
from vote import VIEW, Echo, pct  # noqa: E402  (vote puts the repository on sys.path)

from pomoview.client import Client, messages  # noqa: E402
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc  # noqa: E402
from tests.e2e.server_process import VOTES, ServerProcess, wait_for_flush  # noqa: E402


class Reader:
    """One reader thread's connection and prebuilt calls: `call(i)` sends the i-th RPC, cycling
    over batches of `per_rpc` ids. `target` is pomoview or floor, `how` client or stub."""

    def __init__(self, target: str, how: str, address: str, per_rpc: int, ids: np.ndarray) -> None:
        count = 4096 if per_rpc == 1 else 512
        keys = ids[: count * per_rpc].tolist()
        batches = [keys[i : i + per_rpc] for i in range(0, len(keys), per_rpc)]
        self.args: list[Any]
        self.fn: Callable[[Any], Any]
        if target.startswith("pomoview"):
            rows = target == "pomoview rows"  # the row form, as a client before columnar answers
            client = Client(address, timeout=60.0, columnar=False) if rows else Client(address, timeout=60.0)
            self.wait_ready, self.close = client.wait_ready, client.close
            dicts = [[{"id": k} for k in b] for b in batches]
            if how == "stub":
                stub = pb_grpc.ViewServiceStub(self.channel(address))
                self.args = [lookup_request(b, columnar=not rows) for b in dicts]
                self.fn = lambda req: stub.Lookup(req, timeout=60.0)
            elif per_rpc == 1:
                self.args, self.fn = dicts, lambda b: client.lookup(VIEW, b[0])
            else:
                self.args, self.fn = dicts, lambda b: client.lookup_many(VIEW, b)
        else:
            floor = FloorClient(address)
            self.wait_ready, self.close = floor.wait_ready, floor.close
            if how == "stub":
                raw = self.channel(address).unary_unary(
                    METHOD,
                    request_serializer=M["Keys"].SerializeToString,
                    response_deserializer=M["Rows"].FromString,
                )
                self.args = [M["Keys"](ids=b) for b in batches]
                self.fn = lambda req: raw(req, timeout=60.0)
            else:
                self.args, self.fn = batches, floor.lookup_many

    def channel(self, address: str) -> grpc.Channel:
        """A channel of the stub's own, closed with the client's."""
        channel = grpc.insecure_channel(address)
        close = self.close

        def both() -> None:
            channel.close()
            close()

        self.close = both
        return channel

    def call(self, i: int) -> None:
        self.fn(self.args[i % len(self.args)])


def lookup_request(keys: list[dict[str, object]], columnar: bool = True) -> Any:
    """The request `Client.lookup_many` sends (columnar where the client has that option)."""
    try:
        return messages.lookup_request(VIEW, keys, None, columnar)
    except TypeError:  # a client from before columnar answers
        return messages.lookup_request(VIEW, keys, None)


def read_window(
    target: str, how: str, address: str, pid: int, keys: list[np.ndarray], per_rpc: int, seconds: float
) -> dict[str, float]:
    """One window: a thread per entry of `keys`, each ready before the clock starts."""
    readers = [Reader(target, how, address, per_rpc, ids) for ids in keys]
    window = run_window(readers, seconds, lambda: (cpu_seconds(pid), time.process_time()))
    every, errors, wall = window.latencies, window.errors, window.wall
    cpu, mine = window.metered or (0.0, 0.0)
    if errors:
        raise RuntimeError(f"{target} {how}: {len(errors)} reader errors, first {errors[0]}")
    return {
        "keys_per_s": len(every) * per_rpc / wall if wall else 0.0,
        "p50": pct(every, 0.5),
        "p99": pct(every, 0.99),
        "cpu_us_per_rpc": cpu / len(every) * 1e6 if every else 0.0,
        "client_cpu_us_per_rpc": mine / len(every) * 1e6 if every else 0.0,
    }


def phase(
    how: str,
    per_rpc: int,
    targets: dict[str, tuple[str, int]],
    keys: list[np.ndarray],
    args: argparse.Namespace,
) -> dict[str, dict[str, float]]:
    """A B A B windows of pomoview and the floor; the medians per target."""
    for target, (address, pid) in targets.items():
        read_window(target, how, address, pid, keys, per_rpc, min(1.0, args.window / 2))
    windows: dict[str, list[dict[str, float]]] = {t: [] for t in targets}
    for _ in range(args.windows):
        for target, (address, pid) in targets.items():
            windows[target].append(read_window(target, how, address, pid, keys, per_rpc, args.window))
    out = {t: {k: statistics.median(w[k] for w in ws) for k in ws[0]} for t, ws in windows.items()}
    each = "; ".join(
        f"{t} " + " ".join(f"{w['keys_per_s']:,.0f}" for w in ws) + " keys/s" for t, ws in windows.items()
    )
    print(f"  {per_rpc} key(s)/RPC, {how}: {each}", flush=True)
    return out


def setup(db: Client, args: argparse.Namespace) -> list[tuple[int, str, int]]:
    """Writes the articles and votes, warms every id; the rows (id, title, votes) written."""
    n = args.articles
    rng = np.random.default_rng(1)
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -1.08)
    cdf /= cdf[-1]
    for i in range(0, n, 5000):
        db.write(
            "article", insert=[{"id": k, "title": f"article {k}"} for k in range(i + 1, min(n, i + 5000) + 1)]
        )
    ids = np.searchsorted(cdf, rng.random(args.votes), side="right") + 1
    epoch = 0
    for i in range(0, args.votes, 5000):
        chunk = ids[i : i + 5000].tolist()
        epoch = db.write("vote", insert=[{"article_id": a, "user_id": i + j} for j, a in enumerate(chunk)])
    counts = np.bincount(ids, minlength=n + 1)
    for i in range(1, n + 1, 100):
        db.lookup_many(VIEW, [{"id": k} for k in range(i, min(n, i + 99) + 1)], min_epoch=epoch)
    wait_for_flush(db, epoch)  # the flush's Spark job (rows converted in Python) is over
    return [(k, f"article {k}", int(counts[k])) for k in range(1, n + 1)]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--articles", type=int, default=2000)
    parser.add_argument("--votes", type=int, default=50_000)
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--keys-per-rpc", type=int, nargs="+", default=[1, 100], choices=[1, 100])
    parser.add_argument("--via", nargs="+", default=["client", "stub"], choices=["client", "stub"])
    parser.add_argument(
        "--rows-too",
        action="store_true",
        help="a third target: the same server asked in the row form (Client(columnar=False))",
    )
    args = parser.parse_args(argv)
    rng = np.random.default_rng(7)
    cdf = np.cumsum(np.arange(1, args.articles + 1, dtype=np.float64) ** -1.08)
    cdf /= cdf[-1]
    keys = [np.searchsorted(cdf, rng.random(51_200), side="right") + 1 for _ in range(args.threads)]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lookup-at-rest-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        server = ServerProcess(tmp / "data", program=VOTES, flush_interval=5.0)
        stack.callback(server.stop)
        server.start()
        db = stack.enter_context(Client(server.address, timeout=600.0))
        rows = setup(db, args)
        floor = Echo(rows, tmp, script="typed_floor.py")
        stack.callback(floor.stop)
        assert server.process is not None
        targets = {
            "pomoview": (server.address, server.process.pid),
            "floor": (floor.address, floor.process.pid),
        }
        if args.rows_too:
            targets["pomoview rows"] = targets["pomoview"]
        print(
            f"server on {server.address}, typed floor on {floor.address}, {args.threads} threads", flush=True
        )
        for per_rpc in args.keys_per_rpc:
            for how in args.via:
                results[f"{per_rpc} {how}"] = phase(how, per_rpc, targets, keys, args)
        check(db, floor.address, rows)
    print_table(results)
    return results


def check(db: Client, floor: str, rows: list[tuple[int, str, int]]) -> None:
    """20 answers, through lookup and lookup_many, equal the rows written and the floor's."""
    ids = list(range(1, 11)) + [r[0] for r in rows[-10:]]
    want = {(i,): [{"id": i, "title": t, "votes": v}] for i, t, v in rows if i in ids}
    got = db.lookup_many(VIEW, [{"id": i} for i in ids])
    f = FloorClient(floor)
    try:
        assert got == want == f.lookup_many(ids), "answers differ"
    finally:
        f.close()
    for i in ids[:3]:
        assert db.lookup(VIEW, {"id": i}) == want[(i,)]


def print_table(results: dict[str, Any]) -> None:
    print()
    print(
        "| keys/RPC | via | target | p50 ms | p99 ms | keys/s | server CPU µs/RPC | client CPU µs/RPC "
        "| pomoview / floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        per_rpc, how = name.split()
        for target in r:
            x = r[target]
            ratio = x["keys_per_s"] / r["floor"]["keys_per_s"]
            print(
                f"| {per_rpc} | {how} | {target} | {x['p50'] * 1e3:.2f} | {x['p99'] * 1e3:.2f} | "
                f"{x['keys_per_s']:,.0f} | {x['cpu_us_per_rpc']:.0f} | {x['client_cpu_us_per_rpc']:.0f} | "
                f"{f'**{ratio:.2f}×**' if target != 'floor' else ''} |"
            )


if __name__ == "__main__":
    main()
