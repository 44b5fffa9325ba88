"""Sixteen clients at once against one real server with a small `--memory-budget`: hit reads,
reads that miss (evicted or never read keys), and writes of votes, vote deletions and
retitles, for POMOVIEW_LOAD_SECONDS (10 s in CI; the slow sweep runs 60 s), while one
subscription to some hot keys follows every change.

It checks that no request fails, that the server's resident set stays flat once warm (it is
printed every 5 s), and, at the end, every article's answer against a plain-Python model of
the acknowledged writes, and the subscription's snapshot plus its changes against it too.
It prints the requests served and the p99 of hit reads.

Each client writes only votes of its own users and retitles only its own articles, so the
model does not depend on the order in which concurrent batches committed.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pomoview.client import Client

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel

CLIENTS = 16
ARTICLES = 1000
HOT = 40  # the keys every client reads again and again: they stay present
BUDGET_BYTES = 256 << 10
BUDGET = f"{BUDGET_BYTES >> 10}K"
WARM_UP = 0.3  # of the run: RSS is compared from here on
MAX_GROWTH = 20 << 20  # of RSS after warm-up


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    raise RuntimeError("no VmRSS")


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: dict[str, int] = field(default_factory=lambda: {"hit": 0, "miss": 0, "write": 0})
    errors: list[str] = field(default_factory=list)
    hit_latencies: list[float] = field(default_factory=list)
    last_epoch: int = 0


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, VotesModel]]:
    folder = Path(tmp_path_factory.mktemp("mixed"))
    server = ServerProcess(
        folder / "data", program=VOTES, flush_interval=0.5, extra_args=["--memory-budget", BUDGET]
    ).start()
    model = VotesModel()
    rng = random.Random(11)
    try:
        with server.client() as db:
            articles = [{"id": i, "title": f"article {i}"} for i in range(ARTICLES)]
            db.write("article", insert=articles)
            model.apply("article", articles, [])
            for start in range(0, 20_000, 10_000):
                votes = [{"article_id": rng.randrange(ARTICLES), "user_id": start + j} for j in range(10_000)]
                epoch = db.write("vote", insert=votes)
                model.apply("vote", votes, [])
            # Misses are Spark jobs over Parquet from the start, not overlays of the log on an
            # empty store: before this, the first flush landed 35 s into the load, and the CI
            # run never ran a Spark upquery. A few cold reads warm that path (its imports and
            # Arrow buffers), so that what RSS does after warm-up is the load's.
            wait_for_flush(db, epoch)
            db.lookup_many("articleWithVotes", [{"id": k} for k in range(ARTICLES - 20, ARTICLES)])
        yield server, model
    finally:
        server.stop()


def _client_loop(
    n: int, server: ServerProcess, model: VotesModel, model_lock: threading.Lock, tally: Tally, until: float
) -> None:
    rng = random.Random(100 + n)
    mine: list[dict[str, int]] = []  # this client's live votes
    next_user = 10**6 * (n + 1)  # this client's users: the model needs no write order
    own_articles = [a for a in range(ARTICLES) if a % CLIENTS == n]
    # Each article's title as the model has it now: the module's runs share one server, and a
    # run starting from the loaded titles again deleted rows long gone and left two titles
    # for an article in the model (the final retitle then inserted a row it also deleted).
    with model_lock:
        titles = {a: t for a, t in model.articles if a % CLIENTS == n}
    with Client(server.address, timeout=60.0) as db:
        while time.monotonic() < until:
            roll = rng.random()
            try:
                if roll < 0.6:
                    key = {"id": rng.randrange(HOT)}
                    t0 = time.perf_counter()
                    db.lookup("articleWithVotes", key)
                    elapsed = time.perf_counter() - t0
                    with tally.lock:
                        tally.requests["hit"] += 1
                        tally.hit_latencies.append(elapsed)
                elif roll < 0.75:
                    cold = [{"id": rng.randrange(HOT, ARTICLES)} for _ in range(5)]
                    db.lookup_many("articleWithVotes", cold)
                    with tally.lock:
                        tally.requests["miss"] += 1
                else:
                    kind = rng.random()
                    if kind < 0.7 or not mine:
                        users = range(next_user, next_user + 50)
                        ins = [{"article_id": rng.randrange(ARTICLES), "user_id": u} for u in users]
                        next_user += 50
                        epoch = db.write("vote", insert=ins)
                        with model_lock:
                            model.apply("vote", ins, [])
                        mine += ins
                    elif kind < 0.9:
                        rng.shuffle(mine)
                        gone, mine = mine[:20], mine[20:]
                        epoch = db.write("vote", delete=gone)
                        with model_lock:
                            model.apply("vote", [], gone)
                    else:
                        a = rng.choice(own_articles)
                        old = {"id": a, "title": titles[a]}
                        titles[a] = f"article {a} v{rng.randrange(10**6)}"
                        new = {"id": a, "title": titles[a]}
                        epoch = db.write_batch({"article": ([new], [old])})
                        with model_lock:
                            model.apply("article", [new], [old])
                    with tally.lock:
                        tally.requests["write"] += 1
                        tally.last_epoch = max(tally.last_epoch, epoch)
            except Exception as err:  # noqa: BLE001 (every failure is counted and shown)
                with tally.lock:
                    tally.errors.append(f"client {n}: {type(err).__name__}: {err}")


SUBSCRIBED = [0, 1, 2, 3]


def _follow(server: ServerProcess, tally: Tally, stop_at: list[int], state: dict[tuple[object, ...], int],
            epochs: list[int]) -> None:
    """Applies the subscription's snapshot and changes to `state` (row -> multiplicity) until
    a change at or after `stop_at[0]` (set once every writer has stopped) arrives."""
    try:
        with Client(server.address, timeout=60.0) as db:
            with db.subscribe("articleWithVotes", [{"id": k} for k in SUBSCRIBED]) as sub:
                for change in sub:
                    for row in change.inserts:
                        key = tuple(sorted(row.items()))
                        state[key] = state.get(key, 0) + 1
                    for row in change.deletes:
                        key = tuple(sorted(row.items()))
                        state[key] = state.get(key, 0) - 1
                    epochs.append(change.epoch)
                    if stop_at and change.epoch >= stop_at[0]:
                        return
    except Exception as err:  # noqa: BLE001 (every failure is counted and shown)
        with tally.lock:
            tally.errors.append(f"subscription: {type(err).__name__}: {err}")


def _run(loaded: tuple[ServerProcess, VotesModel], seconds: float) -> None:
    server, model = loaded
    assert server.process is not None
    pid = server.process.pid
    tally = Tally()
    model_lock = threading.Lock()
    rss: list[tuple[float, int]] = []
    start = time.monotonic()
    until = start + seconds
    threads = [
        threading.Thread(target=_client_loop, args=(n, server, model, model_lock, tally, until), daemon=True)
        for n in range(CLIENTS)
    ]
    followed: dict[tuple[object, ...], int] = {}
    epochs: list[int] = []
    stop_at: list[int] = []
    follower = threading.Thread(target=_follow, args=(server, tally, stop_at, followed, epochs), daemon=True)
    follower.start()
    for t in threads:
        t.start()
    report_at = start
    while any(t.is_alive() for t in threads):
        now = time.monotonic()
        rss.append((now - start, _rss(pid)))
        if now >= report_at:
            mib = rss[-1][1] / 2**20
            print(f"  t={now - start:5.1f}s  server RSS {mib:7.1f} MiB  requests {dict(tally.requests)}")
            report_at += 5.0
        time.sleep(0.25)
    for t in threads:
        t.join()
    with server.client() as db:
        stats = db.stats()
        print(f"  memory: {stats['memory']}")
        evicted = 0
        for n in stats["states"]:  # type: ignore[attr-defined]
            evicted += n["evictions"]
            if n["stateful"]:
                print(
                    f"  {n['detail'][:50]:<50} {n['present_keys']:>5} keys {n['rows']:>7} rows "
                    f"~{n['bytes'] >> 10:>5} KiB, {n['evictions']} evicted, {n['dropped']} deltas dropped"
                )
        # The budget was reached while the load ran, not only by the full check below.
        assert evicted > 0, "no key was evicted during the load"
        # And it holds: the states' estimate is brought under the budget at every round (RSS is
        # too noisy to show a slow leak of state; this shows one in the minute's run).
        held = stats["memory"]["partial_state_bytes"]  # type: ignore[index]
        assert held <= 1.5 * BUDGET_BYTES, f"{held} bytes of partial state under a {BUDGET} budget"
        # A vote for every article and a new title for each, in one batch: a key the reader
        # still holds but a state above it lost (an eviction that did not go below, Noria
        # invariant 4) drops this delta there and answers stale at the check below. Without
        # it such a key showed only if a client happened to write it afterwards.
        # Users no client has, new in each run of the module's shared server (a vote already
        # there changes nothing, so the follower below waited for a change never coming).
        fresh = 10**9 + 2 * tally.last_epoch
        votes = [{"article_id": a, "user_id": fresh + 1} for a in range(ARTICLES)]
        old = [{"id": i, "title": t} for i, t in sorted(model.articles)]
        new = [{"id": i, "title": f"{t} final"} for i, t in sorted(model.articles)]
        db.write_batch({"vote": (votes, []), "article": (new, old)})
        model.apply("vote", votes, [])
        model.apply("article", new, old)
        # One more write to a subscribed key: the follower stops at the first change at or
        # after the writers' last epoch, which this one is.
        last = {"article_id": SUBSCRIBED[0], "user_id": fresh}
        tally.last_epoch = db.write("vote", insert=[last])
        model.apply("vote", [last], [])
        stop_at.append(tally.last_epoch)
        follower.join(timeout=5)
        if follower.is_alive() and epochs and epochs[-1] >= tally.last_epoch:
            # Its change arrived before `stop_at` was set: one more change wakes the follower.
            tally.last_epoch = db.write("vote", delete=[last])
            model.apply("vote", [], [last])
            stop_at[0] = tally.last_epoch
    follower.join(timeout=60)
    assert not follower.is_alive(), f"the subscription did not reach epoch {tally.last_epoch}: {epochs[-3:]}"
    latencies = sorted(tally.hit_latencies)
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan")
    p50 = latencies[len(latencies) // 2] if latencies else float("nan")
    warm = [r for t, r in rss if t >= WARM_UP * seconds]
    print(
        f"mixed load, {CLIENTS} clients, {seconds:.0f} s: {sum(tally.requests.values())} requests "
        f"{dict(tally.requests)}, {len(tally.errors)} errors, "
        f"hit p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"RSS after warm-up {min(warm) / 2**20:.1f}..{max(warm) / 2**20:.1f} MiB"
    )
    assert not tally.errors, tally.errors[:5]
    assert tally.requests["hit"] > 0 and tally.requests["miss"] > 0 and tally.requests["write"] > 0
    # Flat once warm: the budget bounds the partial state, so what the resident set may still
    # grow by after warm-up is the budget plus the allocators' slack, not the work done.
    # Measured over a minute: 7 MiB. RSS alone does not show the leak fixed in
    # dataflow/eviction.py (every state above the subscribed reader kept: 1.8 MB of state
    # after a minute, RSS +7 MiB too); the partial state's estimate, checked below, does.
    assert max(warm) - warm[0] <= MAX_GROWTH, f"RSS grew {(max(warm) - warm[0]) >> 20} MiB after warm-up"
    with server.client() as db:
        ids = list(range(ARTICLES))
        for i in range(0, ARTICLES, 500):
            got = db.lookup_many(
                "articleWithVotes", [{"id": k} for k in ids[i : i + 500]], min_epoch=tally.last_epoch
            )
            for k in ids[i : i + 500]:
                assert sorted(got[(k,)], key=lambda r: r["title"]) == model.view(k), f"article {k}"
        expected = [r for k in SUBSCRIBED for r in model.view(k)]
        by_row = lambda r: (r["id"], r["title"])  # noqa: E731
        assert sorted((dict(k) for k, n in followed.items() if n), key=by_row) == sorted(expected, key=by_row)
        assert all(n in (0, 1) for n in followed.values()), "a row inserted twice or deleted while absent"


def test_sixteen_clients_mixed_load(loaded: tuple[ServerProcess, VotesModel]) -> None:
    _run(loaded, float(os.environ.get("POMOVIEW_LOAD_SECONDS", "10")))


@pytest.mark.slow
def test_sixteen_clients_mixed_load_a_minute(loaded: tuple[ServerProcess, VotesModel]) -> None:
    _run(loaded, 60.0)
