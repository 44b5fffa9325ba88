"""Recursive rules with a cycle in their body, in process (the Engine, no server): the
planner's worst-case-optimal plans (planner/ir/cyclic.py) against the forced binary plan
(`binary_joins`, how every recursive body was planned before), with a plain-Python closure
as the peer.

    .venv/bin/python bench/recursive_triangles.py [--edges 4000] [--vertices 2000] [--starts 8]

Two programs over a seeded power-law graph e (bench/triangles_data.py's), each a table:

- outside: pairs of `f` extended along the edges of e that lie on a triangle,

      treach(x: X, y: Y) :- f(src: X, dst: Y).
      treach(x: X, y: Z) :- treach(x: X, y: Y), e(src: Y, dst: Z), e(src: Z, dst: W),
                            e(src: Y, dst: W), Z != W.

  f: `--starts` pairs from new vertices to the graph's largest hubs. The binary plan joins
  treach with e and then e again inside the loop: every reached vertex's two-paths, per
  start, at every iteration. The planner's computes e's triangles (Y, Z) once, outside the
  loop (a WcojJoin), and the loop joins treach with them.
- through: a closure whose every step must land on a target its start allows,

      cr(x: X, y: Y) :- f(src: X, dst: Y).
      cr(x: A, y: C) :- cr(x: A, y: B), e(src: B, dst: C), f(src: A, dst: C).

  the triangle cr(A, B), e(B, C), f(A, C) closes through the recursive atom. f: for each of
  `--starts` new vertices, `--allowed` random vertices and the hubs. The binary plan joins
  cr with e inside the loop (each reached vertex's every out-edge, traced) and then filters
  by f; the planner's is one NestedWcoj in the loop, proposing C from the smaller of e(B, ·)
  and f(A, ·).

Each plan is built in a process of its own (`--one PLAN --shape SHAPE`: RSS growth is the
process's own), alternating (wcoj, binary, wcoj, binary, ... for `--rounds`), with the
Python closure in this process between them: the time of the first whole read (hydration
and the fixpoint), the process's RSS growth by it, and single-edge writes (an insert of an
edge from a hub that closes a triangle there, then its delete; `--writes` of each) each
followed by the whole read. Medians; every answer is checked against the Python closure.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tables import table  # noqa: E402
from triangles_data import power_law_graph  # noqa: E402

from pomoview.dataflow.operators.child import Child  # noqa: E402
from pomoview.dataflow.operators.nested_wcoj import NestedWcoj  # noqa: E402
from pomoview.dataflow.operators.wcoj import WcojJoin  # noqa: E402
from pomoview.engine.engine import Engine  # noqa: E402

SOURCES = "".join(f"source {name}(src: int, dst: int).\n" for name in "efs") + "view r().\n"
PROGRAMS = {
    "outside": SOURCES
    + "r(x: X, y: Y) :- f(src: X, dst: Y).\n"
    + "r(x: X, y: Z) :- r(x: X, y: Y), e(src: Y, dst: Z), e(src: Z, dst: W), e(src: Y, dst: W), Z != W.\n",
    "through": SOURCES
    + "r(x: X, y: Y) :- s(src: X, dst: Y).\n"
    + "r(x: A, y: C) :- r(x: A, y: B), e(src: B, dst: C), f(src: A, dst: C).\n",
}

Edge = tuple[int, int]


def workload(args: argparse.Namespace) -> tuple[list[Edge], list[Edge], list[Edge], list[Edge]]:
    """e's edges, f's pairs, s's, and the edges the writes insert and delete: each closes a
    triangle at a hub (absent from e). Outside: f the start pairs (new vertices to the hubs),
    s empty; through: s the start pairs, f the targets each start allows."""
    pairs = power_law_graph(args.edges, args.vertices, args.skew, args.seed)
    e = [(int(a), int(b)) for a, b in pairs]
    out_degree: dict[int, int] = {}
    for a, _ in e:
        out_degree[a] = out_degree.get(a, 0) + 1
    hubs = sorted(out_degree, key=lambda v: -out_degree[v])[: args.starts]
    base = int(pairs.max()) + 1
    present = set(e)
    rng = random.Random(args.seed)
    succ: dict[int, list[int]] = {}
    for a, b in e:
        succ.setdefault(a, []).append(b)
    writes: list[Edge] = []
    for hub in hubs:  # hub -> z -> w with hub -> w absent: inserting (hub, w) closes one
        for z in rng.sample(succ[hub], min(len(succ[hub]), 5)):
            ws = [w for w in succ.get(z, ()) if w != hub and (hub, w) not in present]
            if ws:
                writes.append((hub, rng.choice(ws)))
                break
    writes = writes[: args.writes]
    starts = [(base + i, hub) for i, hub in enumerate(hubs)]
    if args.shape == "outside":
        return e, starts, [], writes
    vertices = sorted(out_degree)
    f: list[Edge] = []
    for i in range(args.starts):  # each start allows some vertices, the hubs and the writes' ends
        allowed = set(rng.sample(vertices, min(args.allowed, len(vertices)))) | set(hubs)
        f += [(base + i, v) for v in sorted(allowed | {w for _, w in writes})]
    return e, f, starts, writes


def closure(shape: str, e: set[Edge], f: list[Edge], s: list[Edge]) -> set[Edge]:
    """The peer, breadth first: from f along e's triangle edges (outside), or from s along
    e's edges to the targets f allows the start (through)."""
    if shape == "outside":
        return closure_over_triangles(e, f)
    allowed = set(f)
    succ: dict[int, list[int]] = {}
    for a, b in e:
        succ.setdefault(a, []).append(b)
    out = set(s)
    frontier = list(s)
    while frontier:
        new = [(x, z) for x, y in frontier for z in succ.get(y, ()) if (x, z) in allowed]
        new = [pair for pair in new if pair not in out]
        out.update(new)
        frontier = list(dict.fromkeys(new))
    return out


def closure_over_triangles(e: set[Edge], f: list[Edge]) -> set[Edge]:
    """The triangle edges (Y, Z) first, then a breadth-first closure from f."""
    succ: dict[int, set[int]] = {}
    for a, b in e:
        succ.setdefault(a, set()).add(b)
    steps: dict[int, list[int]] = {}
    for y, zs in succ.items():
        for z in zs:
            if any(w != z and w in zs for w in succ.get(z, ())):
                steps.setdefault(y, []).append(z)
    out = set(f)
    frontier = list(f)
    while frontier:
        new = [(x, z) for x, y in frontier for z in steps.get(y, ()) if (x, z) not in out]
        out.update(new)
        frontier = list(dict.fromkeys(new))
    return out


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def rows(edges: list[Edge]) -> list[dict[str, object]]:
    return [{"src": a, "dst": b} for a, b in edges]


def one(args: argparse.Namespace) -> None:
    """One plan, built and measured in this process; prints its figures as JSON."""
    e, f, s, writes = workload(args)
    engine = Engine(PROGRAMS[args.shape], partial=False, binary_joins=args.one == "binary")
    engine.write(insert={"e": rows(e), "f": rows(f), "s": rows(s)})
    before = rss_mib()
    started = time.perf_counter()
    got = engine.read("r")
    hydrate = time.perf_counter() - started
    grown = rss_mib() - before
    present = set(e)
    ok = got == closure(args.shape, present, f, s)
    times: dict[str, list[float]] = {"insert": [], "delete": []}
    for edge in writes:
        for what in ("insert", "delete"):
            started = time.perf_counter()
            engine.write(**{what: {"e": rows([edge])}})
            got = engine.read("r")
            times[what].append(time.perf_counter() - started)
            present = present | {edge} if what == "insert" else present - {edge}
            ok = ok and got == closure(args.shape, present, f, s)
    nodes = list(engine.graph.graph.nodes)
    nodes += [n for child in nodes if isinstance(child, Child) for n in child.circuit.nodes]
    print(
        json.dumps(
            {
                "hydrate": hydrate,
                "rss": grown,
                "insert": statistics.median(times["insert"]) if writes else 0.0,
                "delete": statistics.median(times["delete"]) if writes else 0.0,
                "pairs": len(got),
                "ok": ok,
                "wcoj": any(isinstance(n, (WcojJoin, NestedWcoj)) for n in nodes),
            }
        )
    )


def run_one(plan: str, argv: list[str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", plan, *argv], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict[str, float]]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=4000)
    parser.add_argument("--vertices", type=int, default=2000)
    parser.add_argument("--skew", type=float, default=2.2)
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--allowed", type=int, default=300, help="targets each start allows (through)")
    parser.add_argument("--writes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--shape", choices=list(PROGRAMS), nargs="+", default=list(PROGRAMS))
    parser.add_argument("--one", choices=["wcoj", "binary"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        (args.shape,) = args.shape
        one(args)
        return {}
    out = {}
    for shape in args.shape:
        out[shape] = measure(args, shape)
    return out


def measure(args: argparse.Namespace, shape: str) -> dict[str, dict[str, float]]:
    """One program's table: its plans alternated, the Python closure between them."""
    names = ("edges", "vertices", "skew", "starts", "allowed", "writes", "seed")
    passed = [word for name in names for word in (f"--{name}", str(getattr(args, name)))]
    passed += ["--shape", shape]
    args = argparse.Namespace(**{**vars(args), "shape": shape})
    e, f, s, writes = workload(args)
    print(f"\n{shape}: e {len(e):,} edges over {args.vertices:,} vertices (skew {args.skew}); "
          f"f {len(f):,} pairs, s {len(s):,}; {len(writes)} insert/delete pairs")
    runs: dict[str, list[dict[str, float]]] = {"wcoj": [], "binary": [], "python": []}
    for _ in range(args.rounds):
        for plan in ("wcoj", "binary"):
            figures = run_one(plan, passed)
            assert figures["ok"], f"{shape}, {plan}: an answer differs from the Python closure"
            assert figures["wcoj"] == (plan == "wcoj"), f"{shape}, {plan}: a WCOJ operator {figures['wcoj']}"
            runs[plan].append(figures)
            started = time.perf_counter()
            pairs = closure(shape, set(e), f, s)
            runs["python"].append({"hydrate": time.perf_counter() - started, "pairs": len(pairs)})
    med = {plan: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for plan, rs in runs.items()}
    w, b = med["wcoj"], med["binary"]
    table(
        f"{shape}: {int(w['pairs']):,} pairs "
        f"(medians of {args.rounds}, each plan in a process of its own)",
        "figure|wcoj (planner)|binary (forced)|binary / wcoj|python closure",
        [
            ("first read, s", f"{w['hydrate']:.3f}", f"{b['hydrate']:.3f}",
             f"{b['hydrate'] / w['hydrate']:.1f}", f"{med['python']['hydrate']:.3f}"),
            ("RSS growth by it, MiB", f"{w['rss']:.1f}", f"{b['rss']:.1f}",
             f"{b['rss'] / max(w['rss'], 0.1):.1f}", ""),
            ("edge insert + read, ms", f"{1e3 * w['insert']:.1f}", f"{1e3 * b['insert']:.1f}",
             f"{b['insert'] / max(w['insert'], 1e-9):.1f}", ""),
            ("edge delete + read, ms", f"{1e3 * w['delete']:.1f}", f"{1e3 * b['delete']:.1f}",
             f"{b['delete'] / max(w['delete'], 1e-9):.1f}", ""),
        ],
    )
    return med


if __name__ == "__main__":
    main()
