"""bench/triangles.py's data and peers: the seeded power-law graph (numpy, written as
Parquet), the edges the writes insert and delete, DuckDB's SQL triangle query over the same
Parquet file, clingo over the same edges, and the answers' check.

The graph is a directed Chung-Lu graph: vertex i (by rank) has weight (i + 1)^(-1 / (skew - 1)),
and each edge draws its source and its destination by weight, independently, so a vertex's
expected out-degree and in-degree are both proportional to its weight and the degrees follow
a power law of exponent `skew` (2 < skew: the smaller, the heavier the tail). The same vertex
is a hub both ways, as in a follower graph: the two-paths through it are its in-degree times
its out-degree, which is what a chain of binary joins materializes (sum over vertices of
in x out). Self-loops and repeated edges are dropped; ids are shuffled so that they do not
give the rank away.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

Edge = tuple[int, int]
Triangle = tuple[int, int, int]

TRIANGLES_SQL = (
    "SELECT e1.src, e1.dst, e2.dst FROM {e} e1 JOIN {e} e2 ON e1.dst = e2.src"
    " JOIN {e} e3 ON e3.src = e1.src AND e3.dst = e2.dst"
)


def power_law_graph(edges: int, vertices: int, skew: float, seed: int) -> np.ndarray:
    """`edges` distinct directed edges (src, dst), src != dst, as an (n, 2) int64 array;
    see the module docstring."""
    rng = np.random.default_rng(seed)
    weight = (np.arange(vertices) + 1.0) ** (-1.0 / (skew - 1.0))
    p = weight / weight.sum()
    found = np.empty((0, 2), dtype=np.int64)
    while len(found) < edges:  # heavy tails repeat edges: draw until enough are distinct
        draw = int((edges - len(found)) * 1.2) + 16
        pairs = np.stack([rng.choice(vertices, draw, p=p), rng.choice(vertices, draw, p=p)], axis=1)
        found = np.unique(np.concatenate([found, pairs[pairs[:, 0] != pairs[:, 1]]]), axis=0)
    found = found[np.sort(rng.choice(len(found), edges, replace=False))]
    return rng.permutation(vertices).astype(np.int64)[found]


@dataclass(frozen=True)
class Shape:
    """What the binary plan pays for: degrees, the two-paths, and the hub."""

    edges: int
    vertices: int  # with at least one edge
    max_out: int
    max_in: int
    two_paths: int  # sum over vertices of in-degree x out-degree
    hub: int  # the vertex with the most two-paths through it
    hub_out: int
    hub_in: int


def shape(pairs: np.ndarray) -> Shape:
    size = int(pairs.max()) + 1
    out_deg = np.bincount(pairs[:, 0], minlength=size).astype(np.int64)
    in_deg = np.bincount(pairs[:, 1], minlength=size).astype(np.int64)
    through = out_deg * in_deg
    hub = int(np.argmax(through))
    return Shape(
        edges=len(pairs),
        vertices=int(np.count_nonzero(out_deg + in_deg)),
        max_out=int(out_deg.max()),
        max_in=int(in_deg.max()),
        two_paths=int(through.sum()),
        hub=hub,
        hub_out=int(out_deg[hub]),
        hub_in=int(in_deg[hub]),
    )


def write_parquet(path: Path, pairs: np.ndarray) -> Path:
    pq.write_table(pa.table({"src": pairs[:, 0], "dst": pairs[:, 1]}), path)
    return path


class Adjacency:
    """Successor sets, to pick the writes' edges."""

    def __init__(self, pairs: np.ndarray) -> None:
        self.succ: dict[int, set[int]] = {}
        for a, b in pairs.tolist():
            self.succ.setdefault(a, set()).add(b)

    def has(self, edge: Edge) -> bool:
        return edge[1] in self.succ.get(edge[0], ())

    def closing(self, a: int) -> list[int]:
        """The vertices two steps from `a` and not one: an edge to one closes a triangle."""
        near = self.succ.get(a, set())
        return sorted({c for b in near for c in self.succ.get(b, ())} - near - {a})


def pick_writes(pairs: np.ndarray, hub: int, count: int, seed: int) -> dict[str, list[Edge]]:
    """Edges not in the graph, `count` of each kind: "hub", from the hub to a vertex two steps
    away (each closes triangles, and the binary plan's two-paths through the hub grow by its
    in-degree); "random", between two random vertices of the graph."""
    rng = np.random.default_rng(seed + 1)
    adj = Adjacency(pairs)
    closing = adj.closing(hub)
    targets = [int(v) for v in rng.permutation(np.array(closing, dtype=np.int64))[:count]] if closing else []
    vertices = np.unique(pairs)
    out: dict[str, list[Edge]] = {"hub": [(hub, v) for v in targets], "random": []}
    while len(out["hub"]) < count:  # a tiny graph: too few vertices two steps away
        edge = (hub, int(rng.choice(vertices)))
        if edge[1] != hub and not adj.has(edge) and edge not in out["hub"]:
            out["hub"].append(edge)
    while len(out["random"]) < count:
        edge = (int(rng.choice(vertices)), int(rng.choice(vertices)))
        if edge[0] != edge[1] and not adj.has(edge) and edge not in out["random"]:
            out["random"].append(edge)
    return out


def random_keys(pairs: np.ndarray, count: int, seed: int, leave_out: int) -> list[int]:
    """`count` vertices with an out-edge (a possible `a` of a triangle), not `leave_out`."""
    sources = np.unique(pairs[:, 0])
    sources = sources[sources != leave_out]
    picked = np.random.default_rng(seed + 2).choice(sources, min(count, len(sources)), replace=False)
    return [int(v) for v in picked]


class Duck:
    """DuckDB over the same Parquet file: the whole triangle query (the recompute a view
    server saves), and the writes' checks (the file plus an added edge, whole or one `a`)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path).replace("'", "''")
        self.con = duckdb.connect()

    def triangles(self, added: Edge | None = None, a: int | None = None) -> tuple[float, set[Triangle]]:
        """The triangles over the file (read afresh each time) plus `added`, those whose first
        vertex is `a` if given (DuckDB pushes the filter into the scans), timed."""
        extra = f" UNION ALL SELECT {added[0]}::BIGINT, {added[1]}::BIGINT" if added else ""
        edges = f"(SELECT src, dst FROM read_parquet('{self.path}'){extra})"
        sql = TRIANGLES_SQL.format(e=edges) + ("" if a is None else f" WHERE e1.src = {int(a)}")
        started = time.perf_counter()
        got = self.con.execute(sql).fetchnumpy()
        elapsed = time.perf_counter() - started
        columns = [got[k].tolist() for k in got]
        return elapsed, set(zip(*columns, strict=True))


class Clingo:
    """clingo grounding `t(A, B, C) :- e(A, B), e(B, C), e(A, C).` over the edges as facts."""

    RULE = "t(A,B,C) :- e(A,B), e(B,C), e(A,C).\n#show t/3.\n"

    def __init__(self, pairs: np.ndarray) -> None:
        self.facts = "".join(f"e({a},{b}).\n" for a, b in pairs.tolist())

    def triangles(self) -> tuple[float, set[Triangle]]:
        """Parse, ground and solve, timed (the facts' text is made once, beforehand)."""
        import clingo

        started = time.perf_counter()
        control = clingo.Control(["--warn=none"])
        control.add("base", [], self.facts + self.RULE)
        control.ground([("base", [])])
        found: set[Triangle] = set()

        def on_model(model: clingo.Model) -> None:
            for s in model.symbols(shown=True):
                a, b, c = (x.number for x in s.arguments)
                found.add((a, b, c))

        control.solve(on_model=on_model)
        return time.perf_counter() - started, found


def clingo_available() -> bool:
    try:
        import clingo  # noqa: F401
    except ImportError:
        return False
    return True


class Check:
    """Counts the answers compared; keeps a line per mismatch."""

    def __init__(self) -> None:
        self.count = 0
        self.wrong: list[str] = []

    def same(self, got: set[Triangle], want: set[Triangle], what: str) -> None:
        self.count += 1
        if got != want:
            missing, extra = sorted(want - got)[:3], sorted(got - want)[:3]
            self.wrong.append(
                f"{what}: {len(got):,} triangles, expected {len(want):,} "
                f"(missing e.g. {missing}, extra e.g. {extra})"
            )

    def holds(self, ok: bool, what: str) -> None:
        self.count += 1
        if not ok:
            self.wrong.append(what)


def by_vertex(triangles: Iterable[Triangle]) -> dict[int, set[Triangle]]:
    out: dict[int, set[Triangle]] = {}
    for t in triangles:
        out.setdefault(t[0], set()).add(t)
    return out
