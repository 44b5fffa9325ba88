"""`Subscribe` end to end: the real server process (one for the module), the real clients and
CLI, Spark behind the upqueries.

- Subscriptions opened while random writes go on (articles appear, vanish and are retitled,
  votes come and go) equal a plain-Python recomputation after every change, miss no epoch
  that changed their keys, and join their snapshot exactly (keys filled by a Spark upquery
  while writes arrive).
- The asyncio client; the CLI's JSON lines and its Ctrl-C.
- A subscriber that never reads overflows its buffer (RESOURCE_EXHAUSTED naming the limit)
  while writes and other readers go on at their pace.
- Under a tiny memory budget the reader's other keys are evicted, the subscribed key is not.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pomoview.client import (
    AsyncClient,
    Change,
    Client,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unavailable,
)

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel

VIEW = "articleWithVotes"
BUFFER = 200
Rows = frozenset[tuple[int, str, int]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, server: ServerProcess, metrics_url: str) -> None:
        self.server = server
        self.metrics_url = metrics_url

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.metrics_url, timeout=30) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    return sample.value
        raise KeyError(name)

    def wait_metric(self, name: str, value: float, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while (now := self.metric(name)) != value:
            assert time.monotonic() < deadline, f"{name} is {now}, not {value}"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = Path(tmp_path_factory.mktemp("subscribe")) / "data"
    port = free_port()
    server = ServerProcess(
        data,
        program=VOTES,
        flush_interval=0.5,
        extra_args=[
            "--subscription-buffer", str(BUFFER),
            "--metrics-port", str(port),
            "--memory-budget", "1M",
        ],
    ).start()
    yield Served(server, f"http://127.0.0.1:{port}/metrics")
    # Killed, not stopped: its data is thrown away, and a stop would let a flush under way
    # finish (up to the scheduler's 10 s).
    server.kill()


def as_rows(rows: list[dict[str, object]]) -> set[tuple[int, str, int]]:
    return {(r["id"], r["title"], r["votes"]) for r in rows}  # type: ignore[misc]


class History:
    """The model's view of some keys after each epoch written."""

    def __init__(self, model: VotesModel, keys: list[int]) -> None:
        self.model = model
        self.keys = keys
        self.at: dict[int, Rows] = {}

    def record(self, epoch: int) -> None:
        self.at[epoch] = frozenset(
            (r["id"], r["title"], r["votes"]) for k in self.keys for r in self.model.view(k)
        )

    def of(self, keys: list[int], epoch: int) -> Rows:
        written = max(e for e in self.at if e <= epoch)
        return frozenset(r for r in self.at[written] if r[0] in keys)


class Collector(threading.Thread):
    """Reads one subscription to its end on a thread of its own."""

    def __init__(self, db: Client, keys: list[int]) -> None:
        super().__init__(daemon=True)
        self.keys = keys
        self.sub = db.subscribe(VIEW, [{"id": k} for k in keys])
        self.changes: list[Change] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for change in self.sub:
                self.changes.append(change)
        except BaseException as err:
            self.error = err

    def reached(self, epoch: int) -> bool:
        return bool(self.changes) and self.changes[-1].epoch >= epoch


def random_write(
    rng: random.Random, model: VotesModel, keys: list[int]
) -> tuple[str, list[dict], list[dict]]:
    key = rng.choice(keys)
    titles = [t for i, t in model.articles if i == key]
    roll = rng.random()
    if roll < 0.15 and titles:  # retitle
        return "article", [{"id": key, "title": f"t{rng.randrange(1000)}"}], [{"id": key, "title": titles[0]}]
    if roll < 0.25 and titles:  # the article vanishes (its votes stay)
        return "article", [], [{"id": key, "title": t} for t in titles]
    if roll < 0.35 and not titles:  # it appears (again)
        return "article", [{"id": key, "title": f"t{rng.randrange(1000)}"}], []
    mine = sorted(u for a, u in model.votes if a == key)
    if roll < 0.6 and mine:
        return "vote", [], [{"article_id": key, "user_id": rng.choice(mine)}]
    return "vote", [{"article_id": key, "user_id": rng.randrange(10**6)}], []


def check(collector: Collector, history: History, last: int) -> None:
    """The snapshot and every change against the model, and the last write reached."""
    assert collector.error is None, collector.error
    changes = collector.changes
    keys = collector.keys
    assert changes[0].snapshot and not changes[0].deletes
    assert all(not c.snapshot for c in changes[1:])
    start = changes[0].epoch
    held = as_rows(changes[0].inserts)
    assert held == history.of(keys, start), f"snapshot at {start}"
    epochs = [start]
    for change in changes[1:]:
        assert change.epoch > epochs[-1], "epochs increase"
        deleted, inserted = as_rows(change.deletes), as_rows(change.inserts)
        assert deleted <= held and not (inserted & held), f"epoch {change.epoch}"
        held = (held - deleted) | inserted
        assert held == history.of(keys, change.epoch), f"after epoch {change.epoch}"
        epochs.append(change.epoch)
    # A change is sent per applied step that changed the keys: a step applies the backlog of
    # several epochs at once (server/scheduler/applier.py), and its change is their net change
    # at the last of them. So every change is at an epoch written, changes something, and
    # (checked above) leaves exactly the recomputed rows; the last one reaches `last`.
    assert set(epochs[1:]) <= set(history.at), "changes come at epochs that were written"
    for before, after in zip(epochs, epochs[1:], strict=False):
        assert history.of(keys, after) != history.of(keys, before), f"an empty change at {after}"
    assert epochs[-1] >= last and held == history.of(keys, last), "the changes reach the last write"


def test_subscriptions_equal_a_recomputation_under_random_writes(served: Served) -> None:
    """The keys' fills read the log (nothing is flushed to Parquet yet, or the store and the
    log after it): the same seam as a Spark fill, without waiting for Spark."""
    random_writes_against_the_model(served, list(range(12)), spark=False)


def random_writes_against_the_model(served: Served, keys: list[int], spark: bool) -> None:
    rng = random.Random(5)
    model = VotesModel()
    history = History(model, keys)
    with served.server.client() as db:
        first = [{"id": k, "title": f"t{k}"} for k in keys[:8]]
        epoch = db.write("article", insert=first)
        history.at[epoch - 1] = frozenset()  # none of these keys before
        model.apply("article", first, [])
        history.record(epoch)
        votes = [{"article_id": rng.choice(keys), "user_id": u} for u in range(60)]
        epoch = db.write("vote", insert=votes)
        model.apply("vote", votes, [])
        history.record(epoch)
        collectors: list[Collector] = []
        spark_jobs = 0
        for i in range(120):
            if i == 80 and spark:
                # The last subscription's keys are filled by a keyed Spark job over the store
                # (not only from the log), while the writes below go on.
                wait_for_flush(db, epoch, timeout=600)  # the JVM's boot and first Parquet write
                spark_jobs = db.stats()["spark_jobs"]  # type: ignore[assignment]
            if i in (0, 40, 80):
                # Keys never asked before, so each subscription upqueries while writes arrive.
                subset = [keys[j] for j in {0: [0, 1, 9], 40: [2, 3, 10, 11], 80: [0, 4, 5, 6, 7, 8]}[i]]
                collector = Collector(served.server.client(), subset)
                collector.start()
                collectors.append(collector)
            source, ins, dels = random_write(rng, model, keys)
            epoch = db.write(source, insert=ins, delete=dels)
            model.apply(source, ins, dels)
            history.record(epoch)
        # A last change to every key, so that each subscription shows it reached the end.
        final = [{"id": k, "title": "final"} for k in keys]
        last = db.write("article", insert=final)
        model.apply("article", final, [])
        history.record(last)
        deadline = time.monotonic() + 60
        while not all(c.reached(last) or c.error for c in collectors):
            assert time.monotonic() < deadline, "the subscriptions did not reach the last epoch"
            time.sleep(0.05)
        if spark:
            assert db.stats()["spark_jobs"] > spark_jobs  # type: ignore[operator]
        for collector in collectors:
            collector.sub.close()
            collector.join(timeout=30)
            check(collector, history, last)
    served.wait_metric("pomoview_subscriptions", 0)


def test_the_async_client_subscribes_and_a_break_cancels(served: Served) -> None:
    async def run() -> list[Change]:
        async with AsyncClient(served.server.address, timeout=120) as db:
            await db.write("article", insert=[{"id": 100, "title": "async"}])
            got: list[Change] = []
            async with db.subscribe(VIEW, [{"id": 100}]) as sub:
                async for change in sub:
                    got.append(change)
                    if change.snapshot:
                        assert served.metric("pomoview_subscriptions") == 1
                        await db.write("vote", insert=[{"article_id": 100, "user_id": 1}])
                    else:
                        break
            # Left the block, the channel still open: the server let the subscription go.
            await asyncio.to_thread(served.wait_metric, "pomoview_subscriptions", 0, 30.0)
            return got

    snapshot, change = asyncio.run(run())
    assert snapshot.snapshot and snapshot.inserts == [{"id": 100, "title": "async", "votes": 0}]
    assert not change.snapshot and change.epoch > snapshot.epoch
    assert change.deletes == [{"id": 100, "title": "async", "votes": 0}]
    assert change.inserts == [{"id": 100, "title": "async", "votes": 1}]
    served.wait_metric("pomoview_subscriptions", 0)


def test_the_cli_prints_json_lines_and_ends_on_ctrl_c(served: Served) -> None:
    with served.server.client() as db:
        db.write("article", insert=[{"id": 200, "title": "cli"}])
        proc = subprocess.Popen(
            [sys.executable, "-m", "pomoview.server.cli", "subscribe", VIEW, "id=200",
             "--address", served.server.address],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert proc.stdout is not None
        try:
            first = json.loads(proc.stdout.readline())
            epoch = db.write("vote", insert=[{"article_id": 200, "user_id": 9}])
            second = json.loads(proc.stdout.readline())
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
    assert first == {
        "epoch": first["epoch"], "snapshot": True, "deletes": [],
        "inserts": [{"id": 200, "title": "cli", "votes": 0}],
    }
    assert second == {
        "epoch": epoch, "snapshot": False,
        "deletes": [{"id": 200, "title": "cli", "votes": 0}],
        "inserts": [{"id": 200, "title": "cli", "votes": 1}],
    }
    assert proc.returncode == 0 and "Traceback" not in err, err
    served.wait_metric("pomoview_subscriptions", 0)


def test_bad_subscriptions_get_their_status_and_change_nothing(served: Served) -> None:
    with served.server.client() as db:
        before = db.stats()["readers"]
        with pytest.raises(NotFound, match="no view named 'nope'"):
            next(db.subscribe("nope", [{"id": 1}]))
        with pytest.raises(InvalidArgument, match="has no attribute .idx."):
            next(db.subscribe(VIEW, [{"idx": 1}]))
        with pytest.raises(InvalidArgument, match=r"keys\[1\].id: expected int"):
            next(db.subscribe(VIEW, [{"id": 1}, {"id": "x"}]))
        with pytest.raises(InvalidArgument, match="at least one key"):
            db.subscribe(VIEW, [])
        assert db.stats()["readers"] == before
    assert served.metric("pomoview_subscriptions") == 0


def test_a_subscriber_that_never_reads_overflows_and_holds_nothing_up(served: Served) -> None:
    keys = list(range(1000, 1300))
    with served.server.client() as db:
        # Long titles: each epoch's message is about 600 KB, so the stream's transport
        # buffers (a few MB) fill in a few epochs and the server's buffer after them.
        title = "x" * 1000
        db.write("article", insert=[{"id": k, "title": title} for k in [*keys, 1300]])
        user = iter(range(10**7))

        def write_and_read() -> float:
            """A write to every subscribed key, then another key's lookup at that epoch (it
            waits for the dataflow to apply the epoch): seconds taken."""
            started = time.perf_counter()
            epoch = db.write("vote", insert=[{"article_id": k, "user_id": next(user)} for k in keys])
            other = db.lookup(VIEW, {"id": 1300}, min_epoch=epoch)
            assert other == [{"id": 1300, "title": title, "votes": 0}]
            return time.perf_counter() - started

        db.lookup_many(VIEW, [{"id": k} for k in keys])
        alone = [write_and_read() for _ in range(10)]
        overflows = served.metric("pomoview_subscription_overflows_total")
        stuck = db.subscribe(VIEW, [{"id": k} for k in keys])
        snapshot = next(stuck)  # then never read again, until the end
        assert snapshot.snapshot and len(snapshot.inserts) == len(keys)
        held_up = []
        for i in range(400):
            held_up.append(write_and_read())
            if i % 10 == 9 and served.metric("pomoview_subscription_overflows_total") > overflows:
                break
        else:
            raise AssertionError("400 epochs of 600 changed rows did not overflow the buffer")
        assert served.metric("pomoview_subscriptions") == 0, "an overflowed subscription lets go"
        print(
            f"write + read-your-write, median ms: {statistics.median(alone) * 1000:.1f} alone, "
            f"{statistics.median(held_up) * 1000:.1f} with a stuck subscriber ({len(held_up)} epochs)"
        )
        # Generous: a write path that waited for the subscriber would not finish at all.
        assert statistics.median(held_up) < 5 * statistics.median(alone) + 0.25
        got = []
        with pytest.raises(ResourceExhausted, match=f"limit of {BUFFER} changed rows") as raised:
            for change in stuck:
                got.append(change.epoch)
        assert "fell behind" in str(raised.value)
        assert got == sorted(got) and len(got) < len(held_up)


def test_a_subscribed_key_is_not_evicted_under_a_tiny_budget(served: Served) -> None:
    rng = random.Random(3)
    model = VotesModel()
    keys = list(range(2000, 2400))
    with served.server.client() as db:
        articles = [{"id": k, "title": f"{k} " + "x" * 1000} for k in keys]
        db.write("article", insert=articles)
        model.apply("article", articles, [])
        votes = [{"article_id": rng.choice(keys), "user_id": u} for u in range(4000)]
        epoch = db.write("vote", insert=votes)
        model.apply("vote", votes, [])
        with db.subscribe(VIEW, [{"id": 2005}]) as sub:
            snapshot = next(sub)
            held = as_rows(snapshot.inserts)
            assert held == as_rows(model.view(2005))
            evictions_before = reader_evictions(db)
            for rounds in range(4):
                for i in range(0, len(keys), 100):
                    got = db.lookup_many(VIEW, [{"id": k} for k in keys[i : i + 100]])
                    assert as_rows(got[(keys[i],)]) == as_rows(model.view(keys[i]))
                vote = [{"article_id": 2005, "user_id": 10**6 + rounds}]
                epoch = db.write("vote", insert=vote)
                model.apply("vote", vote, [])
                change = next(sub)
                assert change.epoch == epoch
                held = (held - as_rows(change.deletes)) | as_rows(change.inserts)
                assert held == as_rows(model.view(2005))
            assert reader_evictions(db) > evictions_before, "the reader's other keys were evicted"


def test_an_install_ends_open_subscriptions_with_unavailable(served: Served) -> None:
    with served.server.client() as db:
        db.write("article", insert=[{"id": 3000, "title": "before"}])
        sub = db.subscribe(VIEW, [{"id": 3000}])
        assert next(sub).inserts == [{"id": 3000, "title": "before", "votes": 0}]
        db.install(VOTES.read_text())  # the same program: a new dataflow all the same
        served.wait_metric("pomoview_subscriptions", 0, timeout=30.0)
        with pytest.raises(Unavailable, match="rebuilt .*subscribe again"):
            next(sub)
        # Subscribing again works, over the new dataflow.
        with db.subscribe(VIEW, [{"id": 3000}]) as again:
            assert next(again).inserts == [{"id": 3000, "title": "before", "votes": 0}]


def reader_evictions(db: Client) -> int:
    states = db.stats()["states"]
    assert isinstance(states, list)
    return sum(s["evictions"] for s in states if s["operator"] == "Reader")


@pytest.mark.slow
def test_subscriptions_filled_by_spark_equal_a_recomputation(served: Served) -> None:
    """As above, but the last subscription's keys are filled by a keyed Spark job over the
    flushed store while the writes go on (waits for the JVM and a flush: slow here)."""
    random_writes_against_the_model(served, list(range(50, 62)), spark=True)
