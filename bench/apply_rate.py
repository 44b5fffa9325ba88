"""The apply alone, in process: how many votes a second one step of the vote graph absorbs,
against a plain Python dict of counts doing the same bookkeeping.

    .venv/bin/python bench/apply_rate.py [--articles 100000] [--batch 1000] [--per-step 1 10]

Setup (seeded): `--articles` articles, 20 votes each on average, article ids bounded
Zipf(1.08) as in bench/vote.py; examples/votes.pomo's graph (planner.compile.ProgramGraph,
partial, as the server builds it) with the 2,000 hottest ids (at most half the articles)
warm through a lookup whose fetch reads the in-memory sources. Then steps of `--per-step`
write batches of `--batch` new Zipf votes each, consolidated as the server's applier does
(`consolidated`), stepped and published (`open_step`, `step`, `publish`); the graph drops
the votes of cold articles, as the server's does.

The peer is the same work in plain Python: a set of present votes per warm article and a
count per article (an insert not present adds 1), the floor for exact incremental counts
in Python. Each target runs `--rounds` rounds of 10 steps, alternated (A B A B), and the
table gives the medians. For a before/after comparison, run this file with another
checkout's venv (it uses only the planner's and the applier's public names).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def zipf_ids(rng: np.random.Generator, articles: int, n: int) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        draw = rng.zipf(1.08, 3 * n)
        out += draw[draw <= articles][: n - len(out)].tolist()
    return out


class Workload:
    def __init__(self, articles: int, batch: int, seed: int = 1) -> None:
        self.rng = np.random.default_rng(seed)
        self.articles = articles
        self.batch = batch
        self.votes: dict[int, list[tuple[int, int]]] = {}
        for user, article in enumerate(zipf_ids(self.rng, articles, 20 * articles)):
            self.votes.setdefault(article, []).append((article, user))
        self.titles = {i: (i, f"t{i}") for i in range(1, articles + 1)}
        self.warm = list(range(1, min(2000, articles // 2) + 1))
        self.user = 10**9

    def fetch(self, source: str, cols: Any, keys: list[tuple[int, ...]], filters: Any) -> list[Any]:
        if source == "article":
            return [self.titles[k] for (k,) in keys if k in self.titles]
        return [v for (k,) in keys for v in self.votes.get(k, ())]

    def next_batch(self) -> list[tuple[int, int]]:
        rows = []
        for article in zipf_ids(self.rng, self.articles, self.batch):
            self.user += 1
            rows.append((article, self.user))
        return rows


def pomoview_target(work: Workload) -> Callable[[list[list[tuple[int, int]]]], None]:
    compile_mod = importlib.import_module("pomoview.planner.compile")
    applier = importlib.import_module("pomoview.server.scheduler.applier")
    types = importlib.import_module("pomoview.server.types")
    program = (Path(compile_mod.__file__).resolve().parents[1] / "examples" / "votes.pomo").read_text()
    graph = compile_mod.ProgramGraph(compile_mod.compile_program(program))
    graph.lookup("articleWithVotes", ("id",), [(k,) for k in work.warm], work.fetch)
    epoch = [0]

    def step(batches: list[list[tuple[int, int]]]) -> None:
        logged = []
        for rows in batches:
            epoch[0] += 1
            logged.append(types.LoggedBatch(epoch[0], {"vote": types.SourceChange(tuple(rows), ())}))
        ops = applier.consolidated(logged)
        graph.graph.open_step()
        graph.step(ops)
        graph.graph.publish()

    return step


def dict_target(work: Workload) -> Callable[[list[list[tuple[int, int]]]], None]:
    present = {k: set(work.votes.get(k, ())) for k in work.warm}
    counts = {k: len(v) for k, v in present.items()}

    def step(batches: list[list[tuple[int, int]]]) -> None:
        for rows in batches:
            for row in rows:
                group = present.get(row[0])
                if group is not None and row not in group:
                    group.add(row)
                    counts[row[0]] += 1

    return step


def rate(step: Callable[[list[list[tuple[int, int]]]], None], work: Workload, per_step: int) -> float:
    batches = [[work.next_batch() for _ in range(per_step)] for _ in range(10)]
    started = time.perf_counter()
    for run in batches:
        step(run)
    return sum(len(b) for run in batches for b in run) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--per-step", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Workload(args.articles, args.batch)
    pomoview = pomoview_target(work)
    peer = dict_target(work)
    print(f"apply rate, {args.articles:,} articles, {len(work.warm):,} warm, batches of {args.batch:,} votes")
    print(f"{'batches per step':>16} | {'pomoview votes/s':>16} | {'dict votes/s':>12} | pomoview/dict")
    for per_step in args.per_step:
        rate(pomoview, work, per_step)  # warm-up: first merges, caches
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(args.rounds):
            ours.append(rate(pomoview, work, per_step))
            theirs.append(rate(peer, work, per_step))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{per_step:>16} | {a:>16,.0f} | {b:>12,.0f} | {a / b:.2f}x")


if __name__ == "__main__":
    main()
