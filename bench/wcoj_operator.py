"""The worst-case-optimal join operator against a chain of two binary joins, on a triangle
over a skewed graph, in process (no server): `dataflow/operators/wcoj.py` alone.

    .venv/bin/python bench/wcoj_operator.py [--hub 600] [--edges 20000] [--rounds 3]

The graph (seeded): a hub with `--hub` in-edges and as many out-edges, and `--edges`
random edges among `--vertices` vertices. The view is the triangle
`t(a, b, c) :- e(a, b), e(b, c), e(a, c)`, planned two ways over one full SourceIndex of e:

- wcoj: one WcojJoin (its state: e's forward and reverse CollectionIndex);
- binary: Join(e(a, b), e(b, c)) on b, then Join(that, e(a, c)) on (a, c), as the planner
  builds a body today; the second join holds every two-path, hub² of them through the hub.

For each plan, built anew in each round, the plans alternating (A B A B): the hydration
(the indexes or the joins' states loaded, then the whole answer read once), the largest
state held by the join nodes (rows, as Stats reports them; the source index is not counted)
and the time of single-edge writes touching the hub (an insert then its delete, alternating
with random edges). Medians over the rounds; both answers are checked equal after
hydration and after the writes.

Then three rules over the same e, each one WcojJoin (the triangle; the triangles with
a < b read as a ring, `e(a, b), e(b, c), e(c, a)`; the open triangles, the triangle with
`not e(c, a)`), built with one IndexRegistry (the planner's way: e's indexes held once) and
with one each (how they were held before), alternating: the index entries (Stats' rows),
the memory the build allocated (tracemalloc, the source index's rows included, in a build
of its own), hydration and the same writes. Each rule's answer is checked equal between
the two.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pomoview.dataflow.circuit import Circuit  # noqa: E402
from pomoview.dataflow.node import Filters, Node, fetch_from  # noqa: E402
from pomoview.dataflow.operators.join import Join  # noqa: E402
from pomoview.dataflow.operators.source_index import SourceIndex  # noqa: E402
from pomoview.dataflow.operators.wcoj import Compare, WcojJoin  # noqa: E402
from pomoview.dataflow.state.collection_index import IndexRegistry  # noqa: E402
from pomoview.dataflow.state.keyed_state import Key, Row  # noqa: E402
from pomoview.dataflow.zset import ZSet  # noqa: E402

Edge = tuple[int, int]


class Total(Node):
    """A sink that sums the deltas it receives."""

    def __init__(self, parent: Node) -> None:
        super().__init__(parent.schema, (parent,))
        self.total: ZSet[Row] = ZSet()

    def on_delta(self, port: int, delta: ZSet[Row]) -> ZSet[Row]:
        self.total.extend(delta)
        return ZSet()


def graph(hub: int, edges: int, vertices: int, seed: int) -> set[Edge]:
    rng = random.Random(seed)
    out = {(v, 0) for v in range(1, hub + 1)} | {(0, v) for v in range(hub + 1, 2 * hub + 1)}
    while len(out) < 2 * hub + edges:
        a, b = rng.randrange(1, vertices), rng.randrange(1, vertices)
        if a != b:
            out.add((a, b))
    return out


def writes(data: set[Edge], hub: int, count: int, vertices: int, seed: int) -> list[Edge]:
    """Edges not in the graph, half of them to or from the hub."""
    rng = random.Random(seed + 1)
    out: list[Edge] = []
    while len(out) < count:
        v, w = rng.randrange(1, vertices), rng.randrange(1, vertices)
        edge = (v, w) if len(out) % 2 else rng.choice(((v, 0), (0, v)))
        if edge not in data and edge[0] != edge[1] and edge not in out:
            out.append(edge)
    return out


def source(data: set[Edge]) -> SourceIndex:
    def fetch(name: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> Iterable[Row]:
        return fetch_from(data, ("x", "y"), names, keys, filters)

    return SourceIndex("e", ("x", "y"), (), fetch, partial=False)


def wcoj_plan(e: SourceIndex) -> tuple[Node, list[Node]]:
    join = WcojJoin((e, e, e), (("a", "b"), ("b", "c"), ("a", "c")), ("a", "b", "c"))
    return join, [join]


def binary_plan(e: SourceIndex) -> tuple[Node, list[Node]]:
    paths = Join(e, e, (1,), (0,), partial=False)  # (a, b, c): every two-path
    closed = Join(paths, e, (0, 2), (0, 1), partial=False)
    return closed, [paths, closed]


def state_rows(joins: Collection[Node]) -> int:
    return sum(s.rows for s in (j.state_summary() for j in joins) if s is not None)


def run(
    plan: Callable[[SourceIndex], tuple[Node, list[Node]]], data: set[Edge], edits: list[Edge]
) -> dict[str, Any]:
    top, joins = plan(source(data))
    sink = Total(top)
    circuit = Circuit(sink)
    started = time.perf_counter()
    circuit.hydrate()
    sink.total = top.query((), [()])
    hydrate = time.perf_counter() - started
    answer = ZSet(dict(sink.total.items()))
    peak = state_rows(joins)

    def grown() -> None:
        nonlocal peak
        peak = max(peak, state_rows(joins))

    times = timed_writes(circuit, edits, grown)
    return {
        "hydrate": hydrate,
        "peak": peak,
        "write": statistics.median(times),
        "answer": answer,
        "after": sink.total,
    }


def timed_writes(
    circuit: Circuit, edits: list[Edge], after: Callable[[], None] = lambda: None
) -> list[float]:
    """Each edge inserted then deleted, a step each; the steps' times (`after` each step)."""
    times = []
    for edge in edits:
        for op in (1, -1):
            started = time.perf_counter()
            circuit.step({"e": ZSet({edge: op})})
            times.append(time.perf_counter() - started)
            after()
    return times


def three_rules(e: SourceIndex, registry: IndexRegistry | None) -> list[WcojJoin]:
    """The triangle, the ring with a < b and the open triangle over `e`; `registry` shared
    by the three (None: each join its own)."""
    abc = (("a", "b"), ("b", "c"), ("a", "c"))
    return [
        WcojJoin((e, e, e), abc, ("a", "b", "c"), indexes=registry),
        WcojJoin((e, e, e), (("a", "b"), ("b", "c"), ("c", "a")), ("a", "b", "c"), (Compare("a", "<", "b"),),
                 indexes=registry),
        WcojJoin((e, e, e, e), (*abc, ("c", "a")), ("a", "b", "c"), negated=1, indexes=registry),
    ]


def run_rules(shared: bool, data: set[Edge], edits: list[Edge]) -> dict[str, Any]:
    def build() -> tuple[list[WcojJoin], list[Total], Circuit]:
        joins = three_rules(source(data), IndexRegistry() if shared else None)
        sinks = [Total(j) for j in joins]
        return joins, sinks, Circuit(sinks)

    tracemalloc.start()  # a build of its own: tracemalloc slows what it traces
    circuit = build()[2]
    circuit.hydrate()
    allocated = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    joins, sinks, circuit = build()
    started = time.perf_counter()
    circuit.hydrate()
    for sink, join in zip(sinks, joins, strict=True):
        sink.total = join.query((), [()])
    hydrate = time.perf_counter() - started
    answers = [ZSet(dict(s.total.items())) for s in sinks]
    times = timed_writes(circuit, edits)
    return {
        "hydrate": hydrate,
        "peak": state_rows(joins),
        "bytes": allocated,
        "write": statistics.median(times),
        "answer": answers,
        "after": [s.total for s in sinks],
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hub", type=int, default=600, help="the hub's in-edges (and out-edges)")
    parser.add_argument("--edges", type=int, default=20_000, help="random edges besides the hub's")
    parser.add_argument("--vertices", type=int, default=5_000)
    parser.add_argument("--writes", type=int, default=20, help="edges inserted then deleted, one per step")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    data = graph(args.hub, args.edges, args.vertices, args.seed)
    edits = writes(data, args.hub, args.writes, args.vertices, args.seed)
    results: dict[str, list[dict[str, Any]]] = {"wcoj": [], "binary": []}
    for _ in range(args.rounds):
        for name, plan in (("wcoj", wcoj_plan), ("binary", binary_plan)):
            results[name].append(run(plan, data, edits))
    for a, b in zip(results["wcoj"], results["binary"], strict=True):
        if a["answer"] != b["answer"] or a["after"] != b["after"]:
            raise AssertionError("the plans disagree")
    triangles = len(results["wcoj"][0]["answer"])
    out: dict[str, Any] = {"edges": len(data), "triangles": triangles}
    for name, runs in results.items():
        out[name] = {m: statistics.median(r[m] for r in runs) for m in ("hydrate", "peak", "write")}
    rules: dict[str, list[dict[str, Any]]] = {"shared": [], "own": []}
    for _ in range(args.rounds):
        for name in rules:
            rules[name].append(run_rules(name == "shared", data, edits))
    for a, b in zip(rules["shared"], rules["own"], strict=True):
        if a["answer"] != b["answer"] or a["after"] != b["after"]:
            raise AssertionError("shared and own indexes disagree")
    for name, runs in rules.items():
        out[name] = {m: statistics.median(r[m] for r in runs) for m in ("hydrate", "peak", "bytes", "write")}
    print_table(out, args)
    return out


def print_table(out: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"triangle over {out['edges']} edges (hub {args.hub} in and out), {out['triangles']} triangles; "
        f"medians of {args.rounds} rounds, A B A B; inputs + output = {out['edges'] + out['triangles']} rows"
    )
    print(f"{'':24}{'wcoj':>14}{'binary':>14}{'binary/wcoj':>14}")
    rows = (("hydrate + read (s)", "hydrate", "{:.3f}"), ("peak state (rows)", "peak", "{:.0f}"))
    for label, key, form in (*rows, ("one-edge write (ms)", "write", "{:.3f}")):
        w, b = out["wcoj"][key], out["binary"][key]
        scale = 1000 if key == "write" else 1
        print(f"{label:24}{form.format(w * scale):>14}{form.format(b * scale):>14}{b / w:>14.1f}")
    print()
    print("three rules over e (triangle, ring a < b, open triangle), one WcojJoin each")
    print(f"{'':24}{'shared':>14}{'own':>14}{'own/shared':>14}")
    rows = (*rows, ("allocated (MiB)", "bytes", "{:.1f}"), ("one-edge write (ms)", "write", "{:.3f}"))
    for label, key, form in rows:
        w, b = out["shared"][key], out["own"][key]
        scale = 1000 if key == "write" else 1 / 2**20 if key == "bytes" else 1
        print(f"{label:24}{form.format(w * scale):>14}{form.format(b * scale):>14}{b / w:>14.1f}")


if __name__ == "__main__":
    main()
