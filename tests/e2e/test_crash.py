"""Crash recovery (DESIGN §4): SIGKILL the server at random moments, restart it on the same data
folder, and check what a database user expects.

Three kinds of moment: (1) during a stream of write batches from several clients; (2) during a
flush of the write-ahead log into the Parquet store; (3) during a compaction of the store, which
the flusher runs on a source once it has `Scheduler.compact_min_parts` parts. (2) and (3) watch
the store folder and kill at a chosen step: while Spark writes a part, once a part is renamed
into place but before the manifest lists it, right after the manifest is replaced, or at a
random moment of continuous flushing.

After each kill the server restarts on the same folder, and the checks are:

- every acknowledged batch is there, deletes included, and the epoch counter did not go back;
- no batch is half there: a batch over both sources carries a marker in each (article n, and
  the vote (marker article of its writer, n)), and they are both present or both absent;
- a batch whose write raised (in flight at the kill) is all there or not at all;
- lookups of every key ever written equal a plain-Python model of the acknowledged batches plus
  the in-flight ones that turned out to be there;
- the temporary files and unpublished parts a crash left behind are gone after the restart.

Several rounds kill and restart the same folder. Writer threads own disjoint keys, so the model
does not depend on how their batches interleave. Every seed and kill moment is printed (see
them with `-s`, or in the report of a failing test); rerun one with POMOVIEW_CRASH_SEED=<seed>.
The CI versions are short; the sweeps (marked slow) are run by hand, e.g.

    POMOVIEW_CRASH_ROUNDS=20 .venv/bin/python -m pytest -m slow -s tests/e2e/test_crash.py
    POMOVIEW_CRASH_PHASES=part-writing,anytime POMOVIEW_CRASH_ROUNDS=6 \
        .venv/bin/python -m pytest -m slow -s tests/e2e/test_crash.py -k flushes_sweep

SIGKILL leaves the kernel's page cache alone, so what was written but not fsynced survives it:
these tests catch writes acknowledged before they reach the file, lost or misordered steps of a
flush or a compaction, and recovery mistakes, but not a missing fsync (that takes a power cut).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pomoview.client import Client, PomoviewError

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel

VIEW = "articleWithVotes"
N_WRITERS = 4
# Writer t owns article ids in [STRIDE * (t + 1), STRIDE * (t + 2)); STRIDE * (t + 1) itself is
# its marker article, created at setup, which collects one marker vote per batch of writer t.
STRIDE = 10_000_000
# Each batch n owns the user ids [n * USERS, (n + 1) * USERS) of the votes it inserts.
USERS = 16

Row = tuple  # (id, title) for article, (article_id, user_id) for vote


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def _seed(default: int | None) -> int:
    """POMOVIEW_CRASH_SEED if set; else `default` (CI: fixed), else a fresh one (sweeps)."""
    value = os.environ.get("POMOVIEW_CRASH_SEED")
    if value:
        return int(value)
    return default if default is not None else random.SystemRandom().randrange(1, 2**31)


def _phases(seed: int, choices: tuple[str, ...]) -> list[str]:
    """A sweep's kill moments, one per round: POMOVIEW_CRASH_PHASES (comma-separated, cycled),
    else drawn from `choices` with the seed; POMOVIEW_CRASH_ROUNDS rounds (default 6)."""
    rounds = _env_int("POMOVIEW_CRASH_ROUNDS", 6)
    wanted = [p for p in os.environ.get("POMOVIEW_CRASH_PHASES", "").split(",") if p]
    if wanted:
        unknown = set(wanted) - set(choices)
        assert not unknown, f"unknown phases {unknown}; choose from {choices}"
        return [wanted[i % len(wanted)] for i in range(rounds)]
    rng = random.Random(seed)
    return [rng.choice(choices) for _ in range(rounds)]


_T0 = time.monotonic()


def _say(text: str) -> None:
    print(f"[crash {time.monotonic() - _T0:7.2f}s] {text}", flush=True)


# ------------------------------------------------------------------------------ the workload


class Pool:
    """A set with O(1) add, remove and uniform sampling."""

    def __init__(self) -> None:
        self.items: list[Row] = []
        self.index: dict[Row, int] = {}

    def add(self, item: Row) -> None:
        if item not in self.index:
            self.index[item] = len(self.items)
            self.items.append(item)

    def remove(self, item: Row) -> None:
        i = self.index.pop(item, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.index[last] = i

    def sample(self, rng: random.Random, k: int) -> list[Row]:
        return rng.sample(self.items, min(k, len(self.items)))


@dataclass
class Batch:
    """One write batch with a recognizable id `n`: it inserts article n (if `kind` says so) and
    the marker vote (marker of its writer, n) (if it touches `vote`)."""

    n: int
    writer: int
    kind: str  # "pair" (article + vote, atomically), "votes" or "articles"
    round: int
    article_ins: list[Row] = field(default_factory=list)
    article_del: list[Row] = field(default_factory=list)
    vote_ins: list[Row] = field(default_factory=list)
    vote_del: list[Row] = field(default_factory=list)
    epoch: int | None = None  # set once the write returned: acknowledged
    error: str | None = None  # set if the write raised: in flight at the kill
    failed_at: float = 0.0
    present_after_crash: bool | None = None  # for an in-flight batch, what recovery showed

    @property
    def marker_article(self) -> int | None:
        return self.n if self.article_ins else None

    @property
    def has_marker_vote(self) -> bool:
        return bool(self.vote_ins)

    def changes(self) -> dict[str, tuple[list[dict], list[dict]]]:
        out: dict[str, tuple[list[dict], list[dict]]] = {}
        if self.article_ins or self.article_del:
            out["article"] = (
                [{"id": i, "title": t} for i, t in self.article_ins],
                [{"id": i, "title": t} for i, t in self.article_del],
            )
        if self.vote_ins or self.vote_del:
            out["vote"] = (
                [{"article_id": a, "user_id": u} for a, u in self.vote_ins],
                [{"article_id": a, "user_id": u} for a, u in self.vote_del],
            )
        return out

    def article_ids(self) -> set[int]:
        return {r[0] for r in self.article_ins + self.article_del + self.vote_ins + self.vote_del}

    def describe(self) -> str:
        status = (
            f"acknowledged at epoch {self.epoch}"
            if self.epoch is not None
            else f"in flight ({self.error}), found {'present' if self.present_after_crash else 'absent'}"
        )
        return (
            f"batch {self.n} ({self.kind}, writer {self.writer}, round {self.round}, {status}): "
            f"article +{self.article_ins} -{self.article_del}, vote +{self.vote_ins} -{self.vote_del}"
        )


def marker(writer: int) -> int:
    return STRIDE * (writer + 1)


# An article created at setup that only the test's own steps (not the writers) vote on.
ANCHOR = 1


def _title(n: int) -> str:
    return f"a{n}"


class Writer:
    """One client thread's batches and the model of the tuples it owns (as acknowledged)."""

    def __init__(self, index: int, seed: int) -> None:
        self.index = index
        self.rng = random.Random(seed)
        self.seq = 0
        self.model = VotesModel()
        self.articles = Pool()  # owned articles present (marker excluded)
        self.votes = Pool()  # owned votes present (marker votes excluded)
        self.marker_votes = 0
        self.batches: list[Batch] = []
        self.inflight: Batch | None = None
        self.live_errors: list[str] = []
        self.lookup_failure: tuple[float, str] | None = None

    def next_batch(self, round_: int) -> Batch:
        rng = self.rng
        self.seq += 1
        n = marker(self.index) + self.seq
        kind = rng.choices(["pair", "votes", "articles"], weights=[4, 4, 2])[0]
        b = Batch(n=n, writer=self.index, kind=kind, round=round_)
        users = iter(range(n * USERS, (n + 1) * USERS))
        if kind in ("pair", "votes"):
            b.vote_ins.append((marker(self.index), n))
        if kind in ("pair", "articles"):
            b.article_ins.append((n, _title(n)))
        if kind == "pair":
            b.vote_ins += [(n, next(users)) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.3:
                b.article_del += self.articles.sample(rng, 1)
            if rng.random() < 0.3:
                b.vote_del += self.votes.sample(rng, rng.randint(1, 2))
        elif kind == "votes":
            for a, _ in self.articles.sample(rng, rng.randint(0, 3)):
                b.vote_ins += [(a, next(users)) for _ in range(rng.randint(1, 3))]
            b.vote_del += self.votes.sample(rng, rng.randint(0, 3))
        else:
            b.article_del += self.articles.sample(rng, rng.randint(0, 2))
        return b

    def apply(self, b: Batch) -> None:
        ch = b.changes()
        for source, (ins, dels) in ch.items():
            self.model.apply(source, ins, dels)
        for r in b.article_ins:
            self.articles.add(r)
        for r in b.article_del:
            self.articles.remove(r)
        for r in b.vote_ins:
            if r[0] == marker(self.index):
                self.marker_votes += 1
            else:
                self.votes.add(r)
        for r in b.vote_del:
            self.votes.remove(r)

    def run(
        self,
        address: str,
        round_: int,
        stop: threading.Event,
        pace: float,
        max_batches: int,
        setup: VotesModel,
        read_own_writes: float,
    ) -> None:
        """Writes batches until a write raises (the kill) or `stop` is set; checks, after a
        fraction `read_own_writes` of its batches, that a lookup at the acknowledged epoch reads
        this writer's own writes."""
        written = 0
        with Client(address, timeout=60.0) as db:
            while not stop.is_set():
                if written >= max_batches:
                    stop.wait(0.05)
                    continue
                b = self.next_batch(round_)
                self.batches.append(b)
                try:
                    b.epoch = db.write_batch(b.changes())
                except PomoviewError as err:
                    b.error = f"{err.code.name}: {err}"[:200]
                    b.failed_at = time.monotonic()
                    self.inflight = b
                    return
                self.apply(b)
                written += 1
                if self.rng.random() < read_own_writes and not self._read_own_writes(db, b, setup):
                    return
                if pace:
                    time.sleep(self.rng.uniform(0, 2 * pace))

    def _read_own_writes(self, db: Client, b: Batch, setup: VotesModel) -> bool:
        ids = sorted(
            {marker(self.index), *b.article_ids(), *(r[0] for r in self.articles.sample(self.rng, 3))}
        )
        try:
            got = db.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=b.epoch)
        except PomoviewError as err:
            # The server is gone and the round is over; that it was the kill is checked later.
            self.lookup_failure = (time.monotonic(), f"{err.code.name}: {err}"[:200])
            return False
        expected = expected_views([setup, self.model], ids)
        for i in ids:
            rows = got[(i,)]
            if sorted(rows, key=str) != expected[i]:
                self.live_errors.append(
                    f"writer {self.index}: lookup of article {i} at epoch {b.epoch} gave {rows}, "
                    f"expected {expected[i]}"
                )
        return True


def expected_views(models: Iterable[VotesModel], ids: Iterable[int]) -> dict[int, list[dict]]:
    """VotesModel.view for many ids at once, over the union of disjoint models."""
    articles: dict[int, list[str]] = {}
    counts: Counter[int] = Counter()
    for m in models:
        for i, t in m.articles:
            articles.setdefault(i, []).append(t)
        counts.update(a for a, _ in m.votes)
    return {
        i: sorted(({"id": i, "title": t, "votes": counts[i]} for t in articles.get(i, [])), key=str)
        for i in ids
    }


# ------------------------------------------------------------------------------ the run


class CrashRun:
    """The writers, the model and the server of one crash test, across its rounds."""

    def __init__(self, data: Path, seed: int, flush_interval: float, extra_args: tuple[str, ...] = ()):
        self.data = data
        self.store = data / "store"
        self.seed = seed
        self.rng = random.Random(seed)
        self.flush_interval = flush_interval
        self.extra_args = list(extra_args)
        self.writers = [Writer(t, self.rng.randrange(2**31)) for t in range(N_WRITERS)]
        self.setup = VotesModel()  # the marker articles
        self.max_acked = 0
        self.server: ServerProcess | None = None
        self.round = 0
        self.kills: list[str] = []

    # -- server life

    def start(self, program: bool = False) -> ServerProcess:
        self.server = ServerProcess(
            self.data,
            program=VOTES if program else None,
            flush_interval=self.flush_interval,
            extra_args=self.extra_args,
        ).start()
        return self.server

    def context(self) -> str:
        log = self.server.log_path if self.server else self.data.parent / f"{self.data.name}-server.log"
        return f"seed {self.seed}, round {self.round}, kills {self.kills}; server log {log}"

    def setup_markers(self) -> int:
        assert self.server is not None
        rows = [{"id": marker(t), "title": f"marker {t}"} for t in range(N_WRITERS)]
        rows.append({"id": ANCHOR, "title": "anchor"})
        with self.server.client() as db:
            epoch = db.write("article", insert=rows)
        self.setup.apply("article", rows, [])
        self.max_acked = epoch
        return epoch

    def kill_during_restart(self, delay: float) -> None:
        """Starts the server and SIGKILLs it `delay` s after it logged its configuration, that
        is while it opens the store and replays the log, or soon after."""
        sp = ServerProcess(self.data, flush_interval=self.flush_interval, extra_args=self.extra_args)
        log = sp.log_path

        def count(word: str) -> int:
            return log.read_text(errors="replace").count(word) if log.exists() else 0

        configured, recovered = count("INFO configuration:"), count("INFO recovered:")
        thread = threading.Thread(target=self._start_quietly, args=(sp,), daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while count("INFO configuration:") == configured and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        while sp.process is None:
            time.sleep(0.001)
        sp.process.kill()
        sp.process.wait(timeout=30)
        thread.join(timeout=30)
        when = "after it recovered" if count("INFO recovered:") > recovered else "while it recovered"
        what = f"killed during restart, {delay:.3f}s after it logged its configuration ({when})"
        self.kills.append(what)
        _say(f"round {self.round}: {what}")

    @staticmethod
    def _start_quietly(sp: ServerProcess) -> None:
        try:
            sp.start(timeout=60)
        except (RuntimeError, TimeoutError):
            pass  # killed before it listened

    # -- one round of writes ending in a kill

    def write_and_kill(
        self,
        kill: Callable[[ServerProcess, threading.Event], str],
        pace: float = 0.0,
        max_batches: int = 2000,
        read_own_writes: float = 0.03,
    ) -> None:
        """Runs the writers against the server until `kill` SIGKILLs it; returns once every
        writer has stopped. `pace` is the writers' mean pause between batches (s); lookups of
        their own writes (which need a Spark job once the store has parts) follow a fraction
        `read_own_writes` of the batches."""
        server = self.server
        assert server is not None
        self.round += 1
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=w.run,
                args=(server.address, self.round, stop, pace, max_batches, self.setup, read_own_writes),
                name=f"writer-{w.index}",
                daemon=True,
            )
            for w in self.writers
        ]
        kill_at: list[float] = []
        sigkill = server.kill

        def timed_kill() -> None:
            kill_at.append(time.monotonic())
            sigkill()

        server.kill = timed_kill  # type: ignore[method-assign]
        for t in threads:
            t.start()
        try:
            what = kill(server, stop)
        finally:
            if server.process is not None and server.process.poll() is None:
                server.kill()
            stop.set()
            for t in threads:
                t.join(timeout=90)
        assert not any(t.is_alive() for t in threads), "a writer did not stop after the kill"
        self.kills.append(what)
        self.after_round(kill_at[0])

    def after_round(self, kill_at: float) -> None:
        acked = [b for w in self.writers for b in w.batches if b.round == self.round and b.epoch is not None]
        inflight = [w.inflight for w in self.writers if w.inflight is not None]
        epochs = [b.epoch for b in acked]
        _say(
            f"round {self.round}: {self.kills[-1]}; {len(acked)} batches acknowledged (epochs "
            f"{min(epochs, default=None)}..{max(epochs, default=None)}), {len(inflight)} in flight"  # type: ignore[type-var]
        )
        live = [e for w in self.writers for e in w.live_errors]
        assert not live, f"{self.context()}: reads of own writes before the kill were wrong:\n" + "\n".join(
            live[:20]
        )
        # A write or lookup may fail only because the server died under it.
        for b in inflight:
            assert b.failed_at >= kill_at, f"{self.context()}: a write failed before the kill: {b.describe()}"
        for w in self.writers:
            if w.lookup_failure is not None:
                assert w.lookup_failure[0] >= kill_at, (
                    f"{self.context()}: writer {w.index}'s lookup failed before the kill: "
                    f"{w.lookup_failure[1]}"
                )
                w.lookup_failure = None
        assert len(set(epochs)) == len(epochs), f"{self.context()}: two batches acknowledged with one epoch"
        assert all(e > self.max_acked for e in epochs), (  # type: ignore[operator]
            f"{self.context()}: an epoch acknowledged in this round does not exceed the last "
            f"acknowledged epoch before the restart ({self.max_acked}): the epoch counter went back"
        )
        self.max_acked = max([self.max_acked, *epochs])  # type: ignore[list-item]

    # -- the checks after a restart

    def all_ids(self) -> list[int]:
        ids = {ANCHOR, *(marker(w.index) for w in self.writers)}
        for w in self.writers:
            for b in w.batches:
                ids |= b.article_ids()
        return sorted(ids)

    def check_recovered(self, db: Client) -> None:
        ctx = self.context()
        stats = db.stats()
        assert stats["durable_epoch"] >= self.max_acked, (  # type: ignore[operator]
            f"{ctx}: after the restart the last committed epoch is {stats['durable_epoch']}, but epoch "
            f"{self.max_acked} was acknowledged"
        )
        # Every key ever written, in one lookup (each source answers it with one Spark job).
        ids = self.all_ids()
        started = time.monotonic()
        rows = db.lookup_many(VIEW, [{"id": i} for i in ids], min_epoch=self.max_acked)
        got = {i: sorted(rows[(i,)], key=str) for i in ids}
        looked_up = time.monotonic() - started
        # Which in-flight batches made it: decided by their markers, which must agree.
        failures: list[str] = []
        inflight = [w.inflight for w in self.writers if w.inflight is not None]
        for w in self.writers:
            b = w.inflight
            if b is None:
                continue
            signals: dict[str, bool] = {}
            if b.marker_article is not None:
                signals[f"article {b.n}"] = bool(got[b.n])
            if b.has_marker_vote:
                marker_rows = got[marker(w.index)]
                count = marker_rows[0]["votes"] if marker_rows else None
                if count not in (w.marker_votes, w.marker_votes + 1):
                    failures.append(
                        f"writer {w.index} has {count} marker votes after the restart; "
                        f"{w.marker_votes} were acknowledged and one batch was in flight"
                    )
                signals[f"marker vote ({marker(w.index)}, {b.n})"] = count == w.marker_votes + 1
            present = any(signals.values())
            b.present_after_crash = present
            if len(set(signals.values())) > 1:
                failures.append(f"half a batch survived: {signals}; {b.describe()}")
            elif present:
                w.apply(b)
            w.inflight = None
        assert not failures, f"{ctx}:\n" + "\n".join(failures)
        # Against the model of the acknowledged batches and the in-flight ones found present.
        expected = expected_views([self.setup, *(w.model for w in self.writers)], ids)
        wrong: list[str] = []
        for i in ids:
            if got[i] != expected[i]:
                wrong.append(f"article {i}: got {got[i]}, expected {expected[i]}")
                for w in self.writers:
                    wrong += [f"    {b.describe()}" for b in w.batches if i in b.article_ids()][-6:]
        n_batches = sum(len(w.batches) for w in self.writers)
        assert not wrong, (
            f"{ctx}: {sum(not x.startswith(' ') for x in wrong)} of {len(ids)} articles differ from the "
            f"model of the acknowledged writes:\n" + "\n".join(wrong[:60])
        )
        present = sum(1 for b in inflight if b.present_after_crash)
        _say(
            f"round {self.round}: recovered; {len(ids)} articles of {n_batches} batches match the model "
            f"(looked up in {looked_up:.1f}s); "
            f"in flight: {present} present, {len(inflight) - present} absent; "
            f"durable epoch {stats['durable_epoch']}, flushed {stats['flushed_epoch']}"
        )

    def restart_and_check(self) -> None:
        self.start()
        assert self.server is not None
        with self.server.client() as db:
            self.check_recovered(db)

    def finish(self) -> None:
        """One more write: it gets an epoch above every one acknowledged. (The caller then kills
        the server, rather than stopping it: a stop waits for a Spark session still booting.)"""
        assert self.server is not None
        with self.server.client() as db:
            vote = {"article_id": ANCHOR, "user_id": -1 - self.round}
            epoch = db.write("vote", insert=[vote])
            assert epoch > self.max_acked, f"{self.context()}: epoch {epoch} after {self.max_acked}"
            self.setup.apply("vote", [vote], [])
            rows = db.lookup(VIEW, {"id": ANCHOR}, min_epoch=epoch)
            assert rows == expected_views([self.setup], [ANCHOR])[ANCHOR]


# ------------------------------------------------------------------------------ the store folder


def read_manifest(store: Path) -> dict:
    try:
        return json.loads((store / "manifest.json").read_text())
    except (OSError, ValueError):
        return {"version": 0, "sources": {}}


@dataclass
class StoreState:
    """What a crash left in the store folder and the log, as seen right after the kill."""

    version: int
    temporaries: list[Path]  # .tmp-* files and folders
    unlisted_parts: list[Path]  # part-* folders the manifest does not list
    stale_segments: int  # log segments whose every epoch the manifest already covers

    def describe(self) -> str:
        return (
            f"manifest version {self.version}, {len(self.temporaries)} temporaries, "
            f"{len(self.unlisted_parts)} unpublished parts, {self.stale_segments} log segments "
            "not yet truncated behind the manifest"
        )


def store_state(data: Path) -> StoreState:
    store = data / "store"
    manifest = read_manifest(store)
    listed = {name: set(s["parts"]) for name, s in manifest["sources"].items()}
    temporaries: list[Path] = []
    unlisted: list[Path] = []
    if store.is_dir():
        for entry in store.iterdir():
            if entry.name.startswith(".tmp-"):
                temporaries.append(entry)
            elif entry.is_dir():
                for sub in entry.iterdir():
                    if sub.name.startswith(".tmp-"):
                        temporaries.append(sub)
                    elif sub.name.startswith("part-") and sub.name not in listed.get(entry.name, set()):
                        unlisted.append(sub)
    firsts = sorted(int(p.name[4:-4]) for p in (data / "wal").glob("wal-*.log"))
    # A segment ends before the next one starts: it is stale if the next starts at or below v + 1.
    stale = sum(1 for nxt in firsts[1:] if nxt <= manifest["version"] + 1)
    return StoreState(manifest["version"], temporaries, unlisted, stale)


def assert_strays_gone(run: CrashRun, before: StoreState) -> None:
    """The temporaries and unpublished parts a crash left are removed when the store opens
    (a part of the same name may be there again only if the new manifest lists it)."""
    listed = {name: set(s["parts"]) for name, s in read_manifest(run.store)["sources"].items()}
    left = [p for p in before.temporaries if p.exists()]
    left += [
        p for p in before.unlisted_parts if p.exists() and p.name not in listed.get(p.parent.name, set())
    ]
    assert not left, f"{run.context()}: the restart left what the crash left behind: {left}"


class ManifestMonitor:
    """Checks, while the server runs, that every file the manifest lists is on disk: a part may
    be deleted only once a manifest that no longer lists it has replaced the old one."""

    def __init__(self, store: Path) -> None:
        self.path = store / "manifest.json"
        self.stamp: tuple[int, int, int] | None = None
        self.files: set[Path] = set()

    def listed(self) -> set[Path]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return set()
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self.stamp:
            doc = read_manifest(self.path.parent)
            files: set[Path] = set()
            for name, source in doc["sources"].items():
                layout = source.get("layout", {})
                for part in source["parts"]:
                    folder = self.path.parent / name / part
                    entries = layout.get(part, {}).get("files")
                    files |= {folder / f for _, f in entries} if entries else {folder}
            self.stamp, self.files = stamp, files
        return self.files

    def violation(self) -> str | None:
        before = self.listed()
        missing = {f for f in before if not f.exists()}
        if not missing:
            return None
        # Parts are never listed again once unlisted: listed before and after the look, missing
        # during it, means listed while missing.
        still = sorted(missing & self.listed())
        if not still:
            return None
        return f"the manifest lists {len(still)} files that are not on disk, e.g. {still[:3]}"


# A compaction's output part is named part-<from>-<to>-c<id> (see SourceStore.compact).
_COMPACTED = re.compile(r"^part-\d+-\d+-c[0-9a-f]+$")


class Watch:
    """Polls the store folder until the moment `phase` names is seen, then SIGKILLs the server;
    returns what was seen when. Runs while the writers write and one flush follows another."""

    FLUSH_PHASES = ("part-writing", "part-renamed", "manifest-published", "anytime")
    COMPACTION_PHASES = ("compact-writing", "compact-renamed", "compact-published", "compact-anytime")

    def __init__(
        self, run: CrashRun, phase: str, rng: random.Random, min_parts: int = 0, skip_compactions: int = 0
    ) -> None:
        assert phase in self.FLUSH_PHASES + self.COMPACTION_PHASES, phase
        self.run = run
        self.phase = phase
        self.rng = rng
        self.min_parts = min_parts  # how many parts make the flusher compact a source
        # Compactions to let run to their end first, watched by the monitor, before the kill.
        self.skip_compactions = skip_compactions
        self.compacted = self.compacted_parts()  # the compacted parts listed before this round
        self.monitor = ManifestMonitor(run.store)

    def sources(self) -> list[Path]:
        return [p for p in (self.run.store / "article", self.run.store / "vote") if p.is_dir()]

    def listed(self, source: str) -> list[str]:
        return list(read_manifest(self.run.store)["sources"].get(source, {}).get("parts", ()))

    def unlisted(self, folder: Path, name: str) -> bool:
        # The manifest is read after the folder: a part seen before it was published is unlisted.
        return name not in self.listed(folder.name)

    def compacted_parts(self) -> set[str]:
        return {
            f"{name}/{part}"
            for name, s in read_manifest(self.run.store)["sources"].items()
            for part in s["parts"]
            if _COMPACTED.match(part)
        }

    def seen(self, v0: int) -> str | None:
        phase = self.phase
        if phase in ("part-writing", "compact-writing"):
            for folder in self.sources():
                # A flush and a compaction never run at once (the flusher does one, then the
                # other): Spark writing into a source that has enough parts is the compaction.
                if phase == "compact-writing" and len(self.listed(folder.name)) < self.min_parts:
                    continue
                for entry in os.scandir(folder):
                    if entry.name.startswith(".tmp-"):
                        return f"Spark writing {folder.name}/{entry.name}"
        elif phase in ("part-renamed", "compact-renamed"):
            for folder in self.sources():
                for entry in os.scandir(folder):
                    if (
                        entry.name.startswith("part-")
                        and (phase == "part-renamed" or _COMPACTED.match(entry.name))
                        and self.unlisted(folder, entry.name)
                    ):
                        return f"{folder.name}/{entry.name} renamed, not in the manifest yet"
        elif phase == "manifest-published":
            v = read_manifest(self.run.store)["version"]
            if v > v0:
                return f"manifest replaced: version {v0} -> {v}"
        elif phase in ("compact-published", "compact-anytime"):
            new = self.compacted_parts() - self.compacted
            if new:
                return f"manifest lists the compacted {sorted(new)}"
        return None

    def steady(self, deadline: float) -> int:
        """Waits until two flushes of this round's writes went through: from then on each flush
        finds log segments the previous one closed. Returns the manifest version."""
        version = read_manifest(self.run.store)["version"]
        flushes = 0
        while flushes < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
            broken = self.monitor.violation()
            assert broken is None, f"{self.run.context()}: while the server ran, {broken}"
            now = read_manifest(self.run.store)["version"]
            if now != version:
                version, flushes = now, flushes + 1
        return version

    def __call__(self, server: ServerProcess, stop: threading.Event) -> str:
        started = time.monotonic()
        deadline = started + 120  # a compaction waits for enough flushes
        v0 = self.steady(deadline)
        for _ in range(self.skip_compactions):
            while not self.compacted_parts() - self.compacted and time.monotonic() < deadline:
                time.sleep(0.0005)
                broken = self.monitor.violation()
                assert broken is None, f"{self.run.context()}: while the server ran, {broken}"
            self.compacted = self.compacted_parts()
        if self.phase == "anytime":
            delay = self.rng.uniform(0.2, 4.0)
            time.sleep(delay)
            server.kill()
            return f"anytime: {delay:.2f}s into continuous flushing"
        while time.monotonic() < deadline:
            broken = self.monitor.violation()
            if broken is not None:
                server.kill()
                raise AssertionError(f"{self.run.context()}: while the server ran, {broken}")
            what = self.seen(v0)
            if what is not None:
                if self.phase in ("part-writing", "compact-writing"):
                    time.sleep(self.rng.uniform(0, 0.3))
                elif self.phase == "compact-anytime":
                    delay = self.rng.uniform(0, 3.0)
                    time.sleep(delay)
                    what += f", then {delay:.2f}s"
                server.kill()
                return f"{self.phase}: {what} after {time.monotonic() - started:.2f}s"
            time.sleep(0.0005)
        server.kill()
        return f"{self.phase}: not seen in 120s, killed anyway"


def spark_ready(run: CrashRun) -> None:
    """Blocks until a flush went through: Spark is up and the flusher runs."""
    assert run.server is not None
    with run.server.client() as db:
        vote = {"article_id": ANCHOR, "user_id": run.round + 2}
        epoch = db.write("vote", insert=[vote])
        run.setup.apply("vote", [vote], [])
        run.max_acked = max(run.max_acked, epoch)
        wait_for_flush(db, epoch, timeout=180)


def _kill_if_running(run: CrashRun | None) -> None:
    if run is not None and run.server is not None and run.server.process is not None:
        if run.server.process.poll() is None:
            run.server.kill()


# ------------------------------------------------------------------------------ 1. writes


def crash_during_writes(tmp_path: Path, seed: int, rounds: int, max_delay: float) -> None:
    run = CrashRun(tmp_path / "data", seed, flush_interval=1.0)
    _say(f"crash during writes: seed {seed}, {rounds} rounds, data {run.data}")
    run.start(program=True)
    try:
        run.setup_markers()
        for _ in range(rounds):
            delay = run.rng.uniform(0.2, max_delay)

            def kill(server: ServerProcess, stop: threading.Event, delay: float = delay) -> str:
                time.sleep(delay)
                server.kill()
                return f"killed {delay:.3f}s into the writes"

            run.write_and_kill(kill, pace=0.002)
            if run.rng.random() < 0.4:
                run.kill_during_restart(run.rng.uniform(0.0, 0.6))
            run.restart_and_check()
        run.finish()
    finally:
        _kill_if_running(run)


def test_sigkill_during_writes_from_several_clients(tmp_path: Path) -> None:
    crash_during_writes(tmp_path, _seed(20261121), rounds=3, max_delay=2.5)


@pytest.mark.slow
def test_sigkill_during_writes_sweep(tmp_path: Path) -> None:
    # Delays up to 30 s: later kills also meet the first flushes once Spark is up.
    crash_during_writes(tmp_path, _seed(None), rounds=_env_int("POMOVIEW_CRASH_ROUNDS", 8), max_delay=30.0)


# ------------------------------------------------------------------------------ 2. flushes, 3. compactions


def crash_rounds(
    run: CrashRun, phases: list[str], restart_kills: float, min_parts: int = 0, skip_compactions: int = 0
) -> None:
    """One round per phase: writes while the store flushes (and compacts), a SIGKILL at that
    phase, a restart on the same folder (itself killed now and then), and the checks."""
    for phase in phases:
        skip = skip_compactions if skip_compactions >= 0 else run.rng.randint(0, 1)
        watch = Watch(run, phase, run.rng, min_parts, skip if phase.startswith("compact") else 0)
        run.write_and_kill(watch, pace=0.02, max_batches=5000, read_own_writes=0.002)
        left = store_state(run.data)
        _say(f"round {run.round}: after the kill: {left.describe()}")
        if run.rng.random() < restart_kills:
            run.kill_during_restart(run.rng.uniform(0.0, 0.6))
        run.start()
        assert_strays_gone(run, left)
        assert run.server is not None
        with run.server.client() as db:
            run.check_recovered(db)


class FlushingServer:
    """A server that flushes every 0.1 s, with Spark up, shared by the tests of this module that
    kill it during flushes and compactions (a Spark boot costs 10-20 s). A test that fails
    leaves it to be started afresh by the next one."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.run: CrashRun | None = None

    @contextlib.contextmanager
    def use(self, seed: int) -> Iterator[CrashRun]:
        if self.run is None:
            data = Path(self.factory.mktemp("crash")) / "data"
            run = CrashRun(data, seed, flush_interval=0.1)
            _say(f"a flushing server: seed {seed}, data {data}")
            self.run = run
            try:
                run.start(program=True)
                run.setup_markers()
                spark_ready(run)
            except BaseException:
                self.close()
                raise
        try:
            yield self.run
            self.run.finish()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        _kill_if_running(self.run)
        self.run = None


@pytest.fixture(scope="module")
def flushing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlushingServer]:
    shared = FlushingServer(tmp_path_factory)
    yield shared
    shared.close()


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_sigkill_during_flushes(flushing: FlushingServer) -> None:
    # The moment between a flush's two atomic steps: a part renamed into place but not in the
    # manifest yet (the log behind it may be truncated only after the manifest lists it). The
    # sweep also kills while Spark writes, just after the manifest is replaced (before the log
    # is truncated behind it) and at random; each round here costs a Spark boot (10-20 s), and
    # the writes test already kills restarts.
    with flushing.use(_seed(7)) as run:
        crash_rounds(run, ["part-renamed"], restart_kills=0.0)


def _sweep(tmp_path: Path, what: str, phases: tuple[str, ...], **rounds: int) -> None:
    """A slow sweep: kills at random phases of `phases` (seeded by POMOVIEW_CRASH_SEED)."""
    seed = _seed(None)
    run = CrashRun(tmp_path / "data", seed, flush_interval=0.1)
    chosen = _phases(seed, phases)
    _say(f"crash during {what}: seed {seed}, phases {chosen}, data {run.data}")
    try:
        run.start(program=True)
        run.setup_markers()
        spark_ready(run)
        crash_rounds(run, chosen, restart_kills=0.2, **rounds)
        run.finish()
    finally:
        _kill_if_running(run)


@pytest.mark.slow
def test_sigkill_during_flushes_sweep(tmp_path: Path) -> None:
    _sweep(tmp_path, "flushes", Watch.FLUSH_PHASES)


def _compaction_parts() -> int:
    """How many parts of a source make the flusher compact it."""
    from pomoview.server.scheduler.scheduler import Scheduler

    return Scheduler.compact_min_parts


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_sigkill_during_compaction(flushing: FlushingServer) -> None:
    # The flusher compacts a source once it has `min_parts` parts: with a flush every 0.1 s
    # that comes every few seconds. One compaction runs to its end (all along, the files the
    # manifest lists must be on disk); the kill comes in the next, once the compacted part is
    # renamed into place and before the manifest lists it in place of the parts it replaces.
    min_parts = _compaction_parts()
    with flushing.use(_seed(7)) as run:
        crash_rounds(run, ["compact-renamed"], restart_kills=0.0, min_parts=min_parts, skip_compactions=1)


@pytest.mark.slow
def test_sigkill_during_compaction_sweep(tmp_path: Path) -> None:
    parts = _compaction_parts()
    _sweep(tmp_path, "compactions", Watch.COMPACTION_PHASES, min_parts=parts, skip_compactions=-1)
