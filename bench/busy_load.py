"""The write load of bench/hits_under_load.py's "busy" phase, run in a process of its own so
that its encoding does not hold the GIL of the process whose readers are timed.

Four threads against one pomoview server, until the parent sets `stop` (or `max_seconds`
pass, whichever is first):

- the writer: batches of `batch` votes (Zipf article ids from `cdf`, user ids from
  `user_base` up, never repeated) through `Client.write` (the client's columnar form), each
  sent once the previous one is acknowledged; it logs (epoch, votes, acknowledged at) per
  batch and counts the votes per article;
- cold misses: `Client.lookup` of `cold_ids` in turn, one at a time (ids no one read before);
- a subscription (`Client.subscribe`) to `subscribed` ids, logging each change's epoch and
  arrival time, and folding the changes into the ids' vote counts; after `stop` it runs
  until the change of the last write that touched its ids has arrived;
- a sampler: `Client.stats()` every `sample_every` s, logging (time, applied_epoch,
  durable_epoch, the call's seconds, the server's own apply_lag_seconds).

Times are `time.monotonic()`, one clock for every process of the machine, so the parent can
compare them with its own. `run` puts one dict of logs into `results` when it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pomoview.client import Client

VIEW = "articleWithVotes"
MAX_ITEMS = 10_000_000  # every loop's bound in count; its bound in time is `max_seconds`


@dataclass
class BusyConfig:
    address: str
    cdf: np.ndarray  # Zipf(1.08) CDF over article ids 1..N (bench/vote.py's Workload.cdf)
    batch: int
    user_base: int
    cold_ids: list[int]
    subscribed: list[int]
    seed: int
    max_seconds: float
    sample_every: float = 0.1
    subscription_wait: float = 600.0  # after `stop`, for the changes of the last writes


@dataclass
class Logs:
    writes: list[tuple[int, int, float, float]] = field(default_factory=list)  # epoch, votes, acked at, s
    hot: list[np.ndarray] = field(default_factory=list)  # per batch: its votes of ids 0..max(subscribed)
    cold: list[tuple[int, float, float]] = field(default_factory=list)  # id, answered at, s
    changes: list[tuple[int, float]] = field(default_factory=list)  # epoch, arrived at
    snapshot_epoch: int = 0
    subscribed_votes: dict[int, int] = field(default_factory=dict)  # snapshot + changes folded
    # at, applied, durable, the call's s, the server's apply lag s
    samples: list[tuple[float, int, int, float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def run(config: BusyConfig, stop: Any, ready: Any, results: Any) -> None:
    """The process's body: `stop` and `ready` are multiprocessing Events, `results` a Queue."""
    logs = Logs()
    counts = np.zeros(len(config.cdf) + 1, dtype=np.int64)
    halt = threading.Event()  # the writer, the cold misses and the sampler stop
    closing = threading.Event()  # the subscription is cancelled
    first_ack = threading.Event()
    subscribed = threading.Event()
    subscriptions: list[Any] = []

    def guarded(name: str, body: Callable[[], None], done: threading.Event | None) -> Callable[[], None]:
        def go() -> None:
            try:
                body()
            except Exception as err:  # noqa: BLE001 (reported by the parent)
                if not (name == "subscription" and closing.is_set()):  # not its cancellation
                    logs.errors.append(f"{name}: {err!r}")
            finally:
                if done is not None:
                    done.set()  # so that `ready` does not wait for a thread that failed

        return go

    def writer() -> None:
        rng = np.random.default_rng(config.seed)
        top = max(config.subscribed)
        user = config.user_base
        with Client(config.address, timeout=60.0) as db:
            for _ in range(MAX_ITEMS):
                if halt.is_set():
                    return
                ids = np.searchsorted(config.cdf, rng.random(config.batch), side="right") + 1
                rows = [
                    {"article_id": a, "user_id": u}
                    for a, u in zip(ids.tolist(), range(user, user + config.batch), strict=True)
                ]
                sent = time.monotonic()
                epoch = db.write("vote", insert=rows)
                acked = time.monotonic()
                user += config.batch
                counts[:] += np.bincount(ids, minlength=len(counts))
                logs.hot.append(np.bincount(ids[ids <= top], minlength=top + 1))
                logs.writes.append((epoch, config.batch, acked, acked - sent))
                first_ack.set()

    def cold() -> None:
        with Client(config.address, timeout=600.0) as db:
            for k in config.cold_ids[:MAX_ITEMS]:
                if halt.is_set():
                    return
                sent = time.monotonic()
                db.lookup(VIEW, {"id": k})
                done = time.monotonic()
                logs.cold.append((k, done, done - sent))

    def subscription() -> None:
        with Client(config.address, timeout=None) as db:
            sub = db.subscribe(VIEW, [{"id": k} for k in config.subscribed])
            subscriptions.append(sub)
            votes = logs.subscribed_votes
            for n, change in enumerate(sub):
                if n == 0:
                    logs.snapshot_epoch = change.epoch
                    subscribed.set()
                else:
                    logs.changes.append((change.epoch, time.monotonic()))
                for row in change.deletes:
                    votes[int(row["id"])] = votes.get(int(row["id"]), 0) - int(row["votes"])  # type: ignore[call-overload]
                for row in change.inserts:
                    votes[int(row["id"])] = votes.get(int(row["id"]), 0) + int(row["votes"])  # type: ignore[call-overload]
                if n >= MAX_ITEMS:
                    return

    def sampler() -> None:
        with Client(config.address, timeout=10.0) as db:
            due = time.monotonic()
            for _ in range(MAX_ITEMS):
                if halt.is_set():
                    return
                sent = time.monotonic()
                stats = db.stats()
                done = time.monotonic()
                applied, durable = int(stats["applied_epoch"]), int(stats["durable_epoch"])  # type: ignore[call-overload]
                lag = float(stats["apply_lag_seconds"])  # type: ignore[arg-type]
                # Dated at the call's start: Stats reads the epochs and the lag first (at one
                # instant, before it may wait for a step's end to read the graph).
                logs.samples.append((sent, applied, durable, done - sent, lag))
                due += config.sample_every
                halt.wait(max(0.0, due - time.monotonic()))

    bodies = {
        "writer": (writer, first_ack),
        "cold": (cold, None),
        "subscription": (subscription, subscribed),
        "sampler": (sampler, None),
    }
    threads = [
        threading.Thread(target=guarded(n, b, done), name=n, daemon=True) for n, (b, done) in bodies.items()
    ]
    assert threads[2].name == "subscription"
    for t in threads:
        t.start()
    deadline = time.monotonic() + config.max_seconds
    first_ack.wait(min(120.0, config.max_seconds))
    subscribed.wait(min(120.0, config.max_seconds))
    ready.set()
    while not stop.wait(0.2) and time.monotonic() < deadline:
        pass
    halt.set()
    joined_by = time.monotonic() + 120.0  # a cold miss in flight finishes first (Spark)
    for t in threads:
        if t.name != "subscription":
            t.join(timeout=max(0.0, joined_by - time.monotonic()))
    follow_to_the_last_write(logs, config.subscribed, config.subscription_wait)
    closing.set()
    for sub in subscriptions:
        sub.close()
    threads[2].join(timeout=10.0)
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        logs.errors.append(f"threads still running at the end: {stuck}")
    results.put({"logs": logs, "counts": counts})


def follow_to_the_last_write(logs: Logs, subscribed: list[int], limit: float) -> None:
    """Waits (at most `limit` s) until the subscription received the change of the last
    write that touched its ids, so that its counts cover every write (the parent checks them)."""
    touched = [epoch for (epoch, *_), hot in zip(logs.writes, logs.hot, strict=True) if hot[subscribed].any()]
    if not touched:
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if logs.changes and logs.changes[-1][0] >= touched[-1]:
            return
        time.sleep(0.05)
    logs.errors.append(f"the subscription did not receive epoch {touched[-1]} in {limit:.0f} s")
