"""Partial state against full state on a story/author/comment schema, through the real server.

    .venv/bin/python bench/partial_memory.py [--scale 1.0] [--touch 0.1]

At scale 1: 100,000 stories, 10,000 authors, 1,000,000 comments (seeded), written as CSV
and loaded with `pomoview load`. Three views:

- storyWithAuthor, keyed by story id (story ⋈ author on the author's id);
- authorStories, keyed by author id (an author and a count of their stories);
- commentThread, keyed by comment id (comment ⋈ story ⋈ author: a chain).

For each of two servers run one after the other on the same data, the default (partial)
and `--full-state`, it times cold single-key lookups per view (and counts the Spark jobs
each took), then reads Zipf(1.1)-distributed keys in batches until `--touch` of each view's
keys have been read, checks a sample of answers against Python, and reports the states'
rows and estimated bytes (Stats.states) and the growth of the server process's RSS (the
Python process; Spark's JVM is another process). The floor is a plain Python dict of each
full view, measured with tracemalloc in this process.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.server_process import ServerProcess  # noqa: E402

PROGRAM = """
source story(id: int, author_id: int, title: string).
source author(id: int, name: string).
source comment(id: int, story_id: int, text: string).
view storyWithAuthor(id).
storyWithAuthor(id: S, title: T, author: N) :- story(id: S, author_id: A, title: T), author(id: A, name: N).
view authorStories(id).
authorStories(id: A, name: N, stories: K) :- author(id: A, name: N), K := count : story(author_id: A).
view commentThread(id).
commentThread(id: C, text: X, title: T, author: N) :-
    comment(id: C, story_id: S, text: X), story(id: S, author_id: A, title: T), author(id: A, name: N).
"""

VIEWS = ("storyWithAuthor", "authorStories", "commentThread")


class Data:
    def __init__(self, scale: float, seed: int = 1) -> None:
        rng = random.Random(seed)
        self.n_authors = max(10, int(10_000 * scale))
        self.n_stories = max(100, int(100_000 * scale))
        self.n_comments = max(1000, int(1_000_000 * scale))
        initials = ("A", "B", "C")
        self.authors = [(a, f"author number {a} {rng.choice(initials)}") for a in range(self.n_authors)]
        self.stories = [
            (s, rng.randrange(self.n_authors), f"a story title of some length: number {s}")
            for s in range(self.n_stories)
        ]
        self.comments = [
            (c, rng.randrange(self.n_stories), f"comment {c}: a line or two of text like people write")
            for c in range(self.n_comments)
        ]

    def write(self, folder: Path) -> dict[str, Path]:
        files = {}
        for name, header, rows in (
            ("author", "id,name", self.authors),
            ("story", "id,author_id,title", self.stories),
            ("comment", "id,story_id,text", self.comments),
        ):
            path = folder / f"{name}.csv"
            with open(path, "w") as f:
                f.write(header + "\n")
                for row in rows:
                    f.write(",".join(str(v) for v in row) + "\n")
            files[name] = path
        return files

    def views(self) -> dict[str, dict[int, list[tuple[Any, ...]]]]:
        """Each view, fully, as a dict key -> rows: the oracle and the floor."""
        name = dict(self.authors)
        story = {s: (a, t) for s, a, t in self.stories}
        count: dict[int, int] = {}
        for _, a, _ in self.stories:
            count[a] = count.get(a, 0) + 1
        return {
            "storyWithAuthor": {s: [(s, t, name[a])] for s, a, t in self.stories},
            "authorStories": {a: [(a, n, count.get(a, 0))] for a, n in self.authors},
            "commentThread": {
                c: [(c, x, story[s][1], name[story[s][0]])] for c, s, x in self.comments
            },
        }

    def size(self, view: str) -> int:
        return {"storyWithAuthor": self.n_stories, "authorStories": self.n_authors,
                "commentThread": self.n_comments}[view]


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def zipf_sampler(n: int, s: float, rng: random.Random) -> Callable[[], int]:
    """Bounded Zipf over 0..n-1 (key k has rank k+1), by inverse CDF."""
    cdf = list(itertools.accumulate(1.0 / (k + 1) ** s for k in range(n)))
    total = cdf[-1]
    return lambda: bisect.bisect_left(cdf, rng.random() * total)


ATTRIBUTES = {
    "storyWithAuthor": ("id", "title", "author"),
    "authorStories": ("id", "name", "stories"),
    "commentThread": ("id", "text", "title", "author"),
}


def answer(view: str, rows: list[dict[str, object]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[a] for a in ATTRIBUTES[view]) for r in rows)


def run_server(mode: str, files: dict[str, Path], data: Data, truth: dict, args: argparse.Namespace,
               tmp: Path) -> dict[str, Any]:
    program = tmp / "app.pomo"
    program.write_text(PROGRAM)
    extra = ["--full-state"] if mode == "full" else []
    server = ServerProcess(tmp / f"data-{mode}", program=program, flush_interval=2.0, extra_args=extra)
    server.start()
    pid = server.process.pid  # type: ignore[union-attr]
    out: dict[str, Any] = {"views": {}}
    try:
        with server.client() as db:
            started = time.monotonic()
            for source in ("author", "story", "comment"):
                db.load(source, files[source], timeout=3600)
            out["load_s"] = time.monotonic() - started
            base = rss(pid)
            rng = random.Random(7)
            for view in VIEWS:
                n = data.size(view)
                stats = db.stats()
                jobs0 = stats["spark_jobs"]
                # Cold single keys: the first lookup of a full server hydrates the view.
                cold, jobs = [], []
                for key in rng.sample(range(n), args.cold):
                    before = db.stats()["spark_jobs"]
                    t = time.monotonic()
                    rows = db.lookup(view, {"id": key})
                    cold.append(time.monotonic() - t)
                    jobs.append(db.stats()["spark_jobs"] - before)  # type: ignore[operator]
                    assert answer(view, rows) == sorted(truth[view][key]), (mode, view, key, rows)
                # Zipf reads until `touch` of the keys were read, in batches of distinct keys.
                draw = zipf_sampler(n, 1.1, rng)
                target = int(n * args.touch)
                seen: set[int] = set()
                reads = 0
                t = time.monotonic()
                attempts = 0
                while len(seen) < target and attempts < target * 50:
                    batch = []
                    want = min(args.batch, target - len(seen))
                    while len(batch) < want and attempts < target * 50:
                        attempts += 1
                        k = draw()
                        reads += 1
                        if k not in seen:
                            seen.add(k)
                            batch.append(k)
                    if not batch:
                        break
                    results = db.lookup_many(view, [{"id": k} for k in batch])
                    for k in batch[:: max(1, len(batch) // 20)]:
                        assert answer(view, results[(k,)]) == sorted(truth[view][k]), (mode, view, k)
                elapsed = time.monotonic() - t
                out["views"][view] = {
                    "cold_p50": statistics.median(cold),
                    "cold_max": max(cold),
                    "jobs": statistics.median(jobs),
                    "first": cold[0],
                    "touched": len(seen),
                    "read_s": elapsed,
                    "jobs_total": db.stats()["spark_jobs"] - jobs0,  # type: ignore[operator]
                }
            stats = db.stats()
            states = [s for s in stats["states"] if s["stateful"]]  # type: ignore[union-attr]
            out["rss"] = rss(pid) - base
            out["bytes"] = sum(s["bytes"] for s in states)
            out["rows"] = sum(s["rows"] for s in states)
            out["partial_states"] = sum(1 for s in states if s["partial"])
            out["states"] = len(states)
            for view in VIEWS:
                mine = [s for s in states if view in s["views"]]
                out["views"][view]["bytes"] = sum(s["bytes"] for s in mine)
                out["views"][view]["rows"] = sum(s["rows"] for s in mine)
    finally:
        server.stop()
    return out


def floor_bytes(views: dict[str, dict[int, list[tuple[Any, ...]]]], touched: float) -> tuple[int, int]:
    """tracemalloc bytes of the full views as dicts, and of a `touched` share of each."""
    def measure(build: Callable[[], object]) -> int:
        tracemalloc.start()
        kept = build()
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del kept
        return size

    # Copies, so that the measured objects are new (the rows are rebuilt as new tuples).
    def copy(share: float) -> object:
        return {
            v: {k: [tuple(r) for r in rows] for k, rows in itertools.islice(d.items(), int(len(d) * share))}
            for v, d in views.items()
        }

    full = measure(lambda: copy(1.0))
    part = measure(lambda: copy(touched))
    return full, part


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--touch", type=float, default=0.1, help="share of each view's keys read")
    parser.add_argument("--cold", type=int, default=9, help="cold single-key lookups per view")
    parser.add_argument("--batch", type=int, default=2000, help="distinct keys per Zipf lookup")
    args = parser.parse_args(argv)
    data = Data(args.scale)
    truth = data.views()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        files = data.write(tmp)
        for mode in ("partial", "full"):
            results[mode] = run_server(mode, files, data, truth, args, tmp)
    full_floor, part_floor = floor_bytes(truth, args.touch)
    p, f = results["partial"], results["full"]
    print(f"\nscale {args.scale}: {data.n_stories:,} stories, {data.n_authors:,} authors, "
          f"{data.n_comments:,} comments; Zipf(1.1) reads until {args.touch:.0%} of each view's keys "
          "were read")
    print(f"load: partial server {p['load_s']:.1f} s, full server {f['load_s']:.1f} s\n")
    print("| view | keys read | partial state MiB (rows) | full state MiB (rows) | partial/full "
          "| cold p50 ms (partial) | Spark jobs per cold lookup | first lookup ms (full) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for view in VIEWS:
        pv, fv = p["views"][view], f["views"][view]
        print(f"| {view} | {pv['touched']:,} | {mib(pv['bytes'])} ({pv['rows']:,}) | {mib(fv['bytes'])} "
              f"({fv['rows']:,}) | {pv['bytes'] / max(1, fv['bytes']):.2f}x | {pv['cold_p50'] * 1000:.0f} "
              f"| {pv['jobs']:.0f} | {fv['first'] * 1000:,.0f} |")
    print("\n| whole server | partial | full | partial/full |")
    print("|---|---:|---:|---:|")
    print(f"| states (estimated bytes) | {mib(p['bytes'])} MiB | {mib(f['bytes'])} MiB | "
          f"{p['bytes'] / max(1, f['bytes']):.2f}x |")
    print(f"| rows held in states | {p['rows']:,} | {f['rows']:,} | {p['rows'] / max(1, f['rows']):.2f}x |")
    print(f"| server RSS growth over the reads | {mib(p['rss'])} MiB | {mib(f['rss'])} MiB | "
          f"{p['rss'] / max(1, f['rss']):.2f}x |")
    print(f"| partial states / states | {p['partial_states']}/{p['states']} | "
          f"{f['partial_states']}/{f['states']} | |")
    print(f"| floor: the views as Python dicts (tracemalloc) | {mib(part_floor)} MiB "
          f"({args.touch:.0%} of keys) | {mib(full_floor)} MiB | {part_floor / max(1, full_floor):.2f}x |")
    return results


if __name__ == "__main__":
    main()
