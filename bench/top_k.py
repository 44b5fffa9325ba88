"""Ordered views with a limit (`view v(k) order by ... limit 10`) through the real server,
against DuckDB and a sorted Python model of the same rows in the same run.

    .venv/bin/python bench/top_k.py [--scale 1.0] [--window 3] [--windows 3] [--threads 4]

Data (seeded numpy): at scale S, 100,000 x S stories `story(id, author_id, created)` with
10,000 x S authors drawn bounded Zipf(1.08) (author k has rank k) and `created` an hour of a
year (ties are common), and 2,000,000 x S votes `vote(story_id, user)` with bounded Zipf(1.08)
story ids; written as Parquet and loaded with `Client.load` into a real `pomoview serve`
process (tests/e2e/server_process.py, flush interval 5 s). Views (PROGRAM below):
newestStories (by a source attribute, `order by created desc, id limit 10`), topStories (by a
count: `order by votes desc, id limit 10`) and allStories (newestStories' rows, unordered).

Authors: the warm set is the 10% hottest (at most 1,000); the cold sample is a few of the
hottest (ranks 1, 2, 3, 5, 10, 20, 50, 100 of the warm set: "hot") and `--cold` random others
("tail"); the small set is up to 1,000 other authors with 1 to 10 stories, whose three views
hold the same rows, so that ordered against unordered there compares like with like.

Phases and figures:
- cold: the first lookup of each sampled author in each view, one at a time, alternated
  with DuckDB's query for the same author; p50/p99 (of 8 hot samples the p99 is the max),
  the Spark jobs per lookup (`stats()`), and the rows fetched per cold lookup, for which the
  growth of the view's SourceIndex and SourceWindow nodes' rows is the proxy: a source index
  may drop rows (a join's other side) that its job fetched. newestStories' SourceWindow
  fetches only each author's first rows (ORDER BY ... LIMIT in the job; its detail in the
  Describe table counts the rows its jobs returned). allStories reads story by author
  through the same SourceIndex as topStories (the graph holds one per source and key), so
  its first lookup of an author, right after topStories', fetches nothing.
- warm windows: every warm and small author looked up, then closed-loop readers
  (`--threads`, 1 key per RPC through `Client.lookup`) over newestStories, topStories and
  allStories in turn (A B C A B C, `--windows` each of `--window` s, medians), keys Zipf over
  the warm set ("zipf": allStories answers every story of the author, up to 14% of them
  all for the hottest), then uniform over the small set ("small": the same rows in each
  view); keys/s, p50/p99, and ordered / unordered.
- one client, at rest: the cold sample, 200 Zipf keys of the warm set and 100 of the small
  set, each looked up in sequence in pomoview (warm hits by now), in DuckDB and in the sorted
  model (dict author -> sorted list, cut at 10), each timed; p50/p99 and ratios.
- state: `Client.describe(view)["nodes"]` after those lookups: per stateful node, present
  keys, rows and rows per present key, operator and detail.
- the top row's delete: for `--deletes` warm authors whose windows left rows out (the
  hottest among them), the story of each ordered view's first row is deleted, then timed
  until a lookup with min_epoch answers (write, apply and the window's refill in the step;
  the write's ack apart); `stats()`' upqueries and spark_jobs before and after, and per node
  the change of rows, present keys, fills (DataflowNode.upqueries: keys filled), evictions,
  and a TopK's refills and the rows they pulled (from its detail). stats()' upqueries counts
  lookups that waited for a Spark fetch: a TopK refilled from the state above is not one. Beside it, writes
  that need no refill as such: a new newest story (then topStories' next lookup, since the
  story joins no count yet), and one vote for topStories' first story.

Answers: every lookup of the cold and at-rest samples of newestStories and topStories equals
DuckDB's (order included), allStories equals the model's set, and every window after a
write equals DuckDB's with the deleted stories left out (after an insert, the model's, since
the Parquet files lack it); a mismatch exits non-zero after the table. `--scale 0.01` takes
about half a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reader_window import run_window  # noqa: E402
from tables import table  # noqa: E402
from top_k_data import HOURS, LIMIT, Check, Data, Duck, Pairs, pairs  # noqa: E402
from vote import pct  # noqa: E402  (vote puts the repository on sys.path)

from pomoview.client import Client  # noqa: E402
from tests.e2e.server_process import ServerProcess  # noqa: E402

PROGRAM = """
source story(id: int, author_id: int, created: int).
source vote(story_id: int, user: int).

newestStories(author_id: A, id: I, created: C) :- story(id: I, author_id: A, created: C).
allStories(author_id: A, id: I, created: C) :- story(id: I, author_id: A, created: C).
storyVotes(id: I, votes: N) :- story(id: I), N := count : vote(story_id: I, user: U).
topStories(author_id: A, id: I, votes: N) :- story(id: I, author_id: A), storyVotes(id: I, votes: N).

view newestStories(author_id) order by created desc, id limit 10.
view topStories(author_id) order by votes desc, id limit 10.
view allStories(author_id).
"""
VIEWS = {"newest": "newestStories", "top": "topStories", "all": "allStories"}
HOT_RANKS = (1, 2, 3, 5, 10, 20, 50, 100)
DELETE_TRIALS = {  # the delete phase's writes, as the table names them
    "newest": "newestStories: delete the first row's story",
    "top": "topStories: delete the first row's story",
    "newest insert": "newestStories: insert a newer story",
    "top after insert": "topStories: its lookup after that insert",
    "top vote": "topStories: one vote for the first story",
}
USER_BASE = 1_000_000_000  # the votes written by the delete phase
STARTED = [time.monotonic()]


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED[0]:6.1f} s] {text}", flush=True)


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - started, out


def nodes(db: Client, view: str) -> dict[str, dict[str, Any]]:
    described: list[dict[str, Any]] = db.describe(VIEWS[view])["nodes"]  # type: ignore[assignment]
    return {str(n["id"]): n for n in described}


def source_rows(of: dict[str, dict[str, Any]]) -> int:
    return sum(int(n["rows"]) for n in of.values() if n["operator"] in ("SourceIndex", "SourceWindow"))


def counters(db: Client) -> tuple[int, int]:
    stats = db.stats()
    return int(stats["upqueries"]), int(stats["spark_jobs"])  # type: ignore[call-overload]


# -- phases ----------------------------------------------------------------------------------


def cold_phase(
    db: Client, duck: Duck, data: Data, groups: dict[str, list[int]], check: Check
) -> dict[str, Any]:
    """The first lookup of each author of `groups` in each view, alternated with DuckDB's."""
    out: dict[str, Any] = {
        v: {g: {"s": [], "fetched": [], "jobs": [], "duck": []} for g in groups} for v in VIEWS
    }
    for group, authors in groups.items():
        for author in authors:
            for view in VIEWS:
                before, (_, jobs) = source_rows(nodes(db, view)), counters(db)
                dt, rows = timed(db.lookup, VIEWS[view], {"author_id": author})
                cell = out[view][group]
                cell["s"].append(dt)
                cell["fetched"].append(source_rows(nodes(db, view)) - before)
                cell["jobs"].append(counters(db)[1] - jobs)
                if view == "all":
                    check.same(set(pairs(view, rows)), data.all_rows(author), f"cold allStories({author})")
                    continue
                dt, want = timed(duck.answer, view, author)
                cell["duck"].append(dt)
                check.same(pairs(view, rows), want, f"cold {VIEWS[view]}({author}) vs DuckDB")
        say(f"  cold {group}: {len(authors)} authors, newestStories p50 {ms(out['newest'][group]['s'])} ms")
    return out


class Lookups:
    """One reader's connection for run_window: `call(i)` looks up the i-th key of `keys`."""

    def __init__(self, address: str, view: str, keys: np.ndarray) -> None:
        client = Client(address, timeout=60.0)
        self.wait_ready, self.close = client.wait_ready, client.close
        self.keys = [{"author_id": int(k)} for k in keys[:8192]]
        self.lookup, self.view = client.lookup, VIEWS[view]

    def call(self, i: int) -> None:
        self.lookup(self.view, self.keys[i % len(self.keys)])


def alternate(label: str, address: str, keys: list[np.ndarray], args: argparse.Namespace) -> dict[str, Any]:
    """The three views in turn (A B C A B C), `args.windows` windows each after an unmeasured
    one (at most 1 s); medians per view."""
    windows: dict[str, list[dict[str, float]]] = {v: [] for v in VIEWS}
    for measured in [False] + [True] * args.windows:
        for view in VIEWS:
            seconds = args.window if measured else min(1.0, args.window / 2)
            window = run_window([Lookups(address, view, ids) for ids in keys], seconds)
            if window.errors:
                raise RuntimeError(
                    f"{label} {view}: {len(window.errors)} reader errors, first {window.errors[0]}"
                )
            every = window.latencies
            if measured:
                windows[view].append(
                    {"keys_per_s": len(every) / window.wall, "p50": pct(every, 0.5), "p99": pct(every, 0.99)}
                )
    out = {v: {k: statistics.median(w[k] for w in ws) for k in ws[0]} for v, ws in windows.items()}
    say(f"  {label}: " + "; ".join(f"{VIEWS[v]} {r['keys_per_s']:,.0f} keys/s" for v, r in out.items()))
    return out


def at_rest(db: Client, duck: Duck, data: Data, authors: list[int], check: Check) -> dict[str, Any]:
    """Each author in sequence, one client: pomoview, DuckDB and the model, each timed."""
    times: dict[str, dict[str, list[float]]] = {
        v: {"pomoview": [], "duckdb": [], "model": []} for v in ("newest", "top")
    }
    for author in authors:
        for view, t in times.items():
            dt, rows = timed(db.lookup, VIEWS[view], {"author_id": author})
            t["pomoview"].append(dt)
            dt, want = timed(duck.answer, view, author)
            t["duckdb"].append(dt)
            dt, modelled = timed(data.answer, view, author)
            t["model"].append(dt)
            check.same(pairs(view, rows), want, f"{VIEWS[view]}({author}) vs DuckDB")
            check.same(modelled, want, f"the model's {VIEWS[view]}({author}) vs DuckDB")
        rows = db.lookup(VIEWS["all"], {"author_id": author})
        check.same(set(pairs("all", rows)), data.all_rows(author), f"allStories({author})")
    return {v: {k: {"p50": pct(x, 0.5), "p99": pct(x, 0.99)} for k, x in t.items()} for v, t in times.items()}


def state_rows(db: Client) -> dict[str, list[dict[str, Any]]]:
    """Per view, its stateful nodes: operator, detail, present keys, rows."""
    keep = ("id", "operator", "detail", "present_keys", "rows")
    return {v: [{k: n[k] for k in keep} for n in nodes(db, v).values() if n["stateful"]] for v in VIEWS}


def _counts(node: dict[str, Any]) -> dict[str, int]:
    """A node's counters: its fields, and a TopK's refills and pulled rows (from its detail)."""
    out = {f: int(node[f]) for f in ("rows", "present_keys", "upqueries", "evictions")}
    for name, pattern in (("refills", r"(\d+) refills"), ("pulled", r"pulled (\d+) rows")):
        found = re.search(pattern, str(node["detail"]))
        out[name] = int(found.group(1)) if found else 0
    return out


def node_changes(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Per node that changed: its rows, present keys, fills (its upqueries), evictions, and a
    TopK's refills and the rows they pulled."""
    fields = {
        "rows": "rows",
        "present_keys": "keys",
        "upqueries": "fills",
        "evictions": "evictions",
        "refills": "refills",
        "pulled": "pulled rows",
    }
    out = {}
    for i, n in after.items():
        if i not in before:
            continue
        now, then = _counts(n), _counts(before[i])
        deltas = [(name, now[f] - then[f]) for f, name in fields.items()]
        if any(d for _, d in deltas):
            out[i] = f"{n['operator']} " + ", ".join(f"{name} {d:+d}" for name, d in deltas if d)
    return out


def write_then_read(db: Client, view: str, author: int, changes: dict[str, Any] | None) -> dict[str, Any]:
    """One write (none: a lookup alone), then a lookup with its epoch: the seconds, stats()'
    upqueries before and after and spark jobs, the nodes' changes, and the rows read."""
    before, (upqueries, jobs) = nodes(db, view), counters(db)
    started = time.perf_counter()
    epoch = db.write_batch(changes) if changes else None
    acked = time.perf_counter()
    rows = db.lookup(VIEWS[view], {"author_id": author}, min_epoch=epoch)
    dt, ack = time.perf_counter() - started, acked - started
    after, (upqueries2, jobs2) = nodes(db, view), counters(db)
    changed = node_changes(before, after)
    return {
        "s": dt,
        "ack": ack,
        "upqueries": (upqueries, upqueries2),
        "jobs": jobs2 - jobs,
        "nodes": changed,
        "rows": pairs(view, rows),
    }


def delete_phase(db: Client, duck: Duck, data: Data, authors: list[int], check: Check) -> dict[str, Any]:
    """Per author: the story of each ordered view's first row deleted; a new newest story, and
    topStories' next lookup; a vote for topStories' first story."""
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in DELETE_TRIALS}
    deleted: list[int] = []

    def trial(kind: str, author: int, changes: dict[str, Any] | None, want: Pairs, peer: str) -> None:
        out[kind].append(write_then_read(db, kind.split()[0], author, changes))
        check.same(out[kind][-1]["rows"], want, f"{DELETE_TRIALS[kind]}, author {author}, vs {peer}")

    for n, author in enumerate(authors):
        for view in ("newest", "top"):
            # Warm: a hit, or the refill of a window the other view's delete emptied a place in.
            first = pairs(view, db.lookup(VIEWS[view], {"author_id": author}))[0][0]
            row = data.delete(first)
            deleted.append(first)
            want = duck.answer(view, author, deleted)
            check.same(data.answer(view, author), want, f"the model's {VIEWS[view]}({author}) vs DuckDB")
            trial(view, author, {"story": ([], [row])}, want, "DuckDB")
        row = data.insert(data.n_stories + 1 + n, author, HOURS + n)
        trial("newest insert", author, {"story": ([row], [])}, data.answer("newest", author), "the model")
        trial("top after insert", author, None, data.answer("top", author), "the model")
        first = data.answer("top", author)[0][0]
        data.vote(first)
        vote: dict[str, Any] = {"vote": ([{"story_id": first, "user": USER_BASE + n}], [])}
        trial("top vote", author, vote, data.answer("top", author), "the model")
    for kind, trials in out.items():
        each = " ".join(f"{t['s'] * 1e3:.1f} ({t['ack'] * 1e3:.1f})" for t in trials)
        say(f"  {DELETE_TRIALS[kind]}: {each} ms (the write's ack)")
    return out


# -- the run ----------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=3.0, help="seconds per warm window")
    parser.add_argument("--windows", type=int, default=3, help="windows per view, alternated")
    parser.add_argument("--threads", type=int, default=4, help="reader threads of the warm windows")
    parser.add_argument("--cold", type=int, default=20, help="tail authors of the cold sample")
    parser.add_argument("--deletes", type=int, default=5, help="authors whose top rows are deleted")
    parser.add_argument("--server-arg", action="append", default=[], help="a serve flag (--server-arg=--x=y)")
    args = parser.parse_args(argv)
    if args.windows < 1 or args.window <= 0 or args.cold < 1 or args.deletes < 1:
        parser.error("--windows, --cold and --deletes must be >= 1 and --window > 0")
    return args


def choose(data: Data, args: argparse.Namespace) -> dict[str, list[int]]:
    """The authors of each phase (see the module docstring); `spare` warms code paths."""
    n_warm = min(1000, data.n_authors // 10)
    rng = np.random.default_rng(3)
    others = [a for a in range(n_warm + 1, data.n_authors + 1) if data.count(a)]
    rng.shuffle(others)
    spare, tail, rest = others[:2], others[2 : 2 + args.cold], others[2 + args.cold :]
    small = [a for a in rest if data.count(a) <= LIMIT][:1000]
    cut = [a for a in range(1, n_warm + 1) if data.count(a) > LIMIT]
    picks = np.unique(np.linspace(0, len(cut) - 1, min(args.deletes, len(cut))).astype(int))
    hot, deletes = [r for r in HOT_RANKS if r <= n_warm], [cut[i] for i in picks]
    warm = list(range(1, n_warm + 1))
    return dict(warm=warm, hot=hot, tail=tail, small=small, spare=spare, deletes=deletes)


def warm_up(db: Client, authors: list[int]) -> float:
    started = time.perf_counter()
    for view in VIEWS.values():
        for i in range(0, len(authors), 100):
            db.lookup_many(view, [{"author_id": a} for a in authors[i : i + 100]])
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    STARTED[0] = time.monotonic()
    out: dict[str, Any] = {"scale": args.scale, "loadavg_before": os.getloadavg()}
    data = Data(args.scale)
    who = choose(data, args)
    check = Check()
    say(
        f"data: {data.n_stories:,} stories, {data.n_authors:,} authors ({data.count(1):,} stories for the "
        f"hottest), {data.n_votes:,} votes; {len(who['warm'])} warm, {len(who['small'])} small authors"
    )
    with tempfile.TemporaryDirectory(prefix="top-k-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        paths = data.write(tmp)
        (tmp / "top_k.pomo").write_text(PROGRAM)
        server = ServerProcess(
            tmp / "data", program=tmp / "top_k.pomo", flush_interval=5.0, extra_args=args.server_arg
        )
        stack.callback(stop_server, server)
        server.start()
        db = stack.enter_context(Client(server.address, timeout=600.0))
        out["load_s"], _ = timed(lambda: [db.load(s, paths[s], timeout=3600) for s in ("story", "vote")])
        duck = Duck(paths)
        for author in who["spare"]:  # the miss paths' code (Spark, Arrow) and DuckDB's, on no one's keys
            for view in VIEWS.values():
                db.lookup(view, {"author_id": author})
            duck.answer("newest", author)
            duck.answer("top", author)
        say(f"loaded in {out['load_s']:.1f} s; server on {server.address}")
        out["cold"] = cold_phase(db, duck, data, {"hot": who["hot"], "tail": who["tail"]}, check)
        out["warm_up_s"] = warm_up(db, who["warm"] + who["small"])
        say(f"{len(who['warm']) + len(who['small'])} authors warm in {out['warm_up_s']:.1f} s")
        cdf = np.cumsum(np.arange(1, len(who["warm"]) + 1, dtype=np.float64) ** -1.08)
        rng = np.random.default_rng(7)
        zipf_keys = [
            np.searchsorted(cdf / cdf[-1], rng.random(8192), side="right") + 1 for _ in range(args.threads)
        ]
        small_keys = [rng.choice(np.array(who["small"]), 8192) for _ in range(args.threads)]
        out["warm"] = {
            "zipf": alternate("warm, Zipf over the warm set", server.address, zipf_keys, args),
            "small": alternate("warm, small authors", server.address, small_keys, args),
        }
        sample = who["hot"] + who["tail"] + zipf_keys[0][:200].tolist() + small_keys[0][:100].tolist()
        out["rest"] = at_rest(db, duck, data, sample, check)
        out["state"] = state_rows(db)
        out["deletes"] = delete_phase(db, duck, data, who["deletes"], check)
        out["delete_authors"] = [(a, data.count(a)) for a in who["deletes"]]
        out["loadavg_after"] = os.getloadavg()
    out["checked"], out["wrong"] = check.count, check.wrong
    say(f"checked {check.count} answers against DuckDB and the model: {len(check.wrong)} wrong")
    print_table(out, data, args)
    if check.wrong:
        raise AssertionError("answers differ:\n" + "\n".join(check.wrong[:20]))
    return out


def stop_server(server: ServerProcess) -> None:
    if server.process is not None and server.process.poll() is None:
        server.stop(timeout=60.0)


# -- the tables -------------------------------------------------------------------------------




def ms(values: Sequence[float]) -> str:
    return f"{pct(list(values), 0.5) * 1e3:.2f} / {pct(list(values), 0.99) * 1e3:.2f}"


def print_table(out: dict[str, Any], data: Data, args: argparse.Namespace) -> None:
    before, after = ("/".join(f"{x:.2f}" for x in out[k]) for k in ("loadavg_before", "loadavg_after"))
    print(
        f"\ntop-k benchmark, scale {args.scale}: {data.n_stories:,} stories, {data.n_authors:,} authors, "
        f"{data.n_votes:,} votes; load {out['load_s']:.0f} s, warm-up {out['warm_up_s']:.0f} s; "
        f"{os.cpu_count()} cores, load average before {before}, after {after}"
        + (f"; serve {' '.join(args.server_arg)}" if args.server_arg else "")
    )
    rows: list[tuple[str, ...]] = []
    for view, name in VIEWS.items():
        for group, c in out["cold"][view].items():
            fetched = f"{statistics.median(c['fetched']):,.0f} (max {max(c['fetched']):,})"
            duck = (
                (ms(c["duck"]), f"{pct(c['s'], 0.5) / pct(c['duck'], 0.5):.1f}x") if c["duck"] else ("", "")
            )
            jobs = f"{statistics.median(c['jobs']):.0f}"
            rows.append(
                (name if group == "hot" else "", f"{group} ({len(c['s'])})", ms(c["s"]), fetched, jobs, *duck)
            )
    header = "view|authors|p50 / p99 ms|source rows fetched/key, median|spark jobs|DuckDB p50 / p99 ms|"
    header += "p50 / DuckDB"
    table("cold lookups (the first of each author), one at a time", header, rows)
    rows = []
    for phase, r in out["warm"].items():
        for view, name in VIEWS.items():
            x, base = r[view], r["all"]
            ratio = f"{base['keys_per_s'] / x['keys_per_s']:.2f}x / {x['p50'] / base['p50']:.2f}x"
            latency = f"{x['p50'] * 1e3:.3f} / {x['p99'] * 1e3:.3f}"
            rows.append((phase if view == "newest" else "", name, f"{x['keys_per_s']:,.0f}", latency, ratio))
    rows = [r if r[1] != VIEWS["all"] else (*r[:4], "") for r in rows]
    title = f"warm lookups, {args.threads} threads, 1 key/RPC, medians of {args.windows} alternated windows"
    table(
        f"{title} of {args.window:g} s", "keys|view|keys/s|p50 / p99 ms|vs allStories: 1/(keys/s), p50", rows
    )
    rows = []
    for view, r in out["rest"].items():
        p, d, m = (r[k] for k in ("pomoview", "duckdb", "model"))
        latencies = [f"{x['p50'] * k:.3f} / {x['p99'] * k:.3f}" for x, k in ((p, 1e3), (d, 1e3), (m, 1e6))]
        rows.append((VIEWS[view], *latencies, f"{p['p50'] / d['p50']:.3f}x", f"{p['p50'] / m['p50']:,.0f}x"))
    header = (
        "view|pomoview p50 / p99 ms|DuckDB p50 / p99 ms|model p50 / p99 µs|pomoview / DuckDB|pomoview / model"
    )
    table("warm lookups at rest, one client, in sequence (cold sample, 200 Zipf, 100 small)", header, rows)
    print_state(out)
    print_deletes(out)
    checked = f"{out['checked']}, {len(out['wrong'])} wrong"
    print(f"\nanswers checked against DuckDB (order included) and the model: {checked}")


def print_state(out: dict[str, Any]) -> None:
    rows: list[tuple[str, ...]] = []
    for view, ns in out["state"].items():
        for i, n in enumerate(ns):
            keys, count = int(n["present_keys"]), int(n["rows"])
            per = f"{count / keys:,.1f}" if keys else "-"
            name = VIEWS[view] if i == 0 else ""
            rows.append((name, n["id"], n["operator"], f"{keys:,}", f"{count:,}", per, n["detail"][:70]))
    header = "view|node|operator|present keys|rows|rows/key|detail"
    table("state after the lookups, stateful nodes (describe(view)['nodes'])", header, rows)


def print_deletes(out: dict[str, Any]) -> None:
    rows: list[tuple[str, ...]] = []
    for kind, trials in out["deletes"].items():
        (a, b), each = (
            trials[0]["upqueries"],
            "/".join(str(t["upqueries"][1] - t["upqueries"][0]) for t in trials),
        )
        jobs = "/".join(str(t["jobs"]) for t in trials)
        changed = "; ".join(f"{i} {c}" for i, c in trials[0]["nodes"].items()) or "none"
        times = f"{ms([t['s'] for t in trials])} ({ms([t['ack'] for t in trials])})"
        rows.append((DELETE_TRIALS[kind], times, f"{a:,} -> {b:,}; each {each}", jobs, changed))
    authors = ", ".join(f"{a} ({n:,} stories)" for a, n in out["delete_authors"])
    header = "write|p50 / p99 ms (the write's ack)|stats() upqueries: first; each|spark jobs each|"
    header += "nodes changed (first write)"
    table(f"a write, then a lookup with its epoch, for authors {authors}", header, rows)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, stopping the server
    main()
