"""The refill of an ordered view's window after its top row's delete, in process (no server,
no Spark): the pull of every row of the key (`pull_in_step`) against the read of the next
rows from the ordered index of the state above (dataflow/operators/in_order.py).

    .venv/bin/python bench/top_k_refill.py [--rows 14000] [--deletes 20] [--rounds 3]

Data (seeded): one author with `--rows` stories whose `created` is an hour of a year (ties
are common) and 200 other authors with 1 to 30 stories, in memory. The view is bench/
top_k.py's newestStories (`order by created desc, id limit 10`) over a story with one
attribute more, `words`, which the view leaves out: TopK <- DistinctIncremental <- Map <-
SourceIndex(story by author_id). (A view of every attribute of one source would read a
SourceWindow instead, planner/ir/windows.py, whose short windows are fetched again rather
than refilled from an index.) Each round builds the graph twice, once per
variant ("pull": `TopK.ordered_refills` off, as before the index; "in order"), alternated A
B A B: the hot author's cold lookup (fill), then `--deletes` times the delete of its first
row, each one step of the graph (the source's delete, the distinct, the TopK's refill),
timed. Figures: medians over every round of the fill and of the delete steps, the refills
and the rows each pulled (TopK's counters), and the rows the index's builds read. Every
window after a delete is checked against a sorted model; a mismatch exits non-zero.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import table  # noqa: E402

from pomoview.dataflow.node import Filters, fetch_from  # noqa: E402
from pomoview.dataflow.operators.in_order import InOrder  # noqa: E402
from pomoview.dataflow.operators.top_k import TopK  # noqa: E402
from pomoview.dataflow.state.keyed_state import Key, Row  # noqa: E402
from pomoview.dataflow.zset import ZSet  # noqa: E402
from pomoview.planner.compile import ProgramGraph, compile_program  # noqa: E402

PROGRAM = """
source story(id: int, author_id: int, created: int, words: int).
newestStories(author_id: A, id: I, created: C) :- story(id: I, author_id: A, created: C).
view newestStories(author_id) order by created desc, id limit 10.
"""
ATTRIBUTES = ("id", "author_id", "created", "words")
HOT = 1
LIMIT = 10
VARIANTS = ("pull", "in order")


def stories(rows: int, seed: int = 1) -> set[Row]:
    rng = random.Random(seed)
    out = {(i, HOT, rng.randrange(365 * 24), 0) for i in range(rows)}
    next_id = rows
    for author in range(2, 202):
        for _ in range(rng.randint(1, 30)):
            out.add((next_id, author, rng.randrange(365 * 24), 0))
            next_id += 1
    return out


def window(data: set[Row]) -> list[tuple[int, int, int]]:
    """The sorted model: the hot author's first rows (created desc, id), as the view's rows."""
    mine = sorted((row for row in data if row[1] == HOT), key=lambda r: (-r[2], r[0]))
    return [(HOT, r[0], r[2]) for r in mine[:LIMIT]]


def one_round(variant: str, base: set[Row], deletes: int) -> dict[str, Any]:
    data = set(base)

    def fetch(source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
        return fetch_from(data, ATTRIBUTES, names, keys, filters)

    # The switch for the whole round, the fill too: "pull" builds no index, as before it.
    TopK.ordered_refills = variant == "in order"
    try:
        return _deletes(graph_of(), fetch, data, deletes)
    finally:
        TopK.ordered_refills = True


def graph_of() -> ProgramGraph:
    return ProgramGraph(compile_program(PROGRAM))


def _deletes(graph: ProgramGraph, fetch: Any, data: set[Row], deletes: int) -> dict[str, Any]:
    started = time.perf_counter()
    [rows] = graph.lookup("newestStories", ("author_id",), [(HOT,)], fetch)
    fill = time.perf_counter() - started
    reader = graph.graph.readers[("newestStories", ("author_id",))]
    assert isinstance(reader, TopK)
    above = reader.inputs[0]
    assert isinstance(above, InOrder), above.describe()
    steps, pulled, bad = [], [], 0
    for _ in range(deletes):
        top = window(data)[0]
        row = (top[1], HOT, top[2], 0)
        data.discard(row)
        before = reader.pulled_rows
        started = time.perf_counter()
        graph.step({"story": ZSet({row: -1})})
        steps.append(time.perf_counter() - started)
        pulled.append(reader.pulled_rows - before)
        [rows] = graph.lookup("newestStories", ("author_id",), [(HOT,)], fetch)
        bad += rows != window(data)
    index = above.order_index(reader.order)
    return {
        "fill": fill,
        "steps": steps,
        "pulled": pulled,
        "refills": reader.refills,
        "built": 0 if index is None else index.built_rows,
        "bad": bad,
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Prints the table; returns per variant its rounds' figures, and `wrong` (windows that
    differed from the model)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=14_000)
    parser.add_argument("--deletes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    base = stories(args.rows)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:  # A B A B: both see the same machine load
            runs[variant].append(one_round(variant, base, args.deletes))
    table(
        f"The top row's delete, {args.rows:,} rows of one key, limit {LIMIT}: {args.rounds} rounds of "
        f"{args.deletes} deletes per variant, alternated (ms, medians)",
        "variant|fill ms|1st delete ms|delete ms|max delete ms|refills|pulled rows/refill|max pulled"
        "|index build rows|wrong windows",
        [_row(variant, runs[variant]) for variant in VARIANTS],
    )
    return {**runs, "wrong": sum(r["bad"] for done in runs.values() for r in done)}


def _row(variant: str, done: list[dict[str, Any]]) -> tuple[str, ...]:
    steps = [s for r in done for s in r["steps"]]
    pulled = [p for r in done for p in r["pulled"]]
    return (
        variant,
        ms(statistics.median(r["fill"] for r in done)),
        ms(statistics.median(r["steps"][0] for r in done)),
        ms(statistics.median(steps)),
        ms(max(steps)),
        str(done[0]["refills"]),
        f"{statistics.median(pulled):g}",
        str(max(pulled)),
        str(done[0]["built"]),
        str(sum(r["bad"] for r in done)),
    )


if __name__ == "__main__":
    sys.exit(1 if main()["wrong"] else 0)
