"""bench/recursive_lookup.py's data and in-process peers: the seeded layered power-law graph
and org tree (numpy, written as Parquet), the BFS floor over an in-memory adjacency, and
clingo with the key as a constant.

Why a layered graph (a DAG) and not a plain random power-law graph: a random directed graph
with power-law out-degrees and 4 edges per node has a giant strongly connected component,
and every node that reaches it has the same closure, most of the graph; a keyed lookup there
is the full closure under another name and says nothing about demand. Here node ids are laid
out in LAYERS layers of equal width; an edge goes from layer l to layer l+1 (sometimes l+2 or
l+3), to a position near its source's (within max(4, out-degree) positions, wrapping), so a
key's closure is a cone over the layers below it: empty for the last layer and for nodes of
out-degree 0, up to thousands of nodes for a hub of the first layers, never the whole graph.
Out-degrees are Zipf(2.2) (capped at 1,000): most nodes have 1 or 2 edges, a few hundreds.

The org tree: employees in LEVELS levels whose sizes grow geometrically (level 0 is the one
root); every employee of level l > 0 reports to one of level l-1, drawn Zipf(1.5) over a
random order of that level (spans of control from 1 to thousands). An employee's chain is
its level's depth, at most LEVELS - 1 managers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LAYERS = 40
LEVELS = 20
MAX_DEGREE = 1000


@dataclass(frozen=True)
class Dataset:
    name: str
    view: str
    source: str
    columns: tuple[str, str]  # (key, value): the source's and the view's attributes

    def key(self, k: int) -> dict[str, int]:
        return {self.columns[0]: k}

    def row(self, k: int, v: int) -> dict[str, int]:
        return {self.columns[0]: k, self.columns[1]: v}


DATASETS = (
    Dataset("graph", "reach", "edge", ("x", "y")),
    Dataset("org", "manager_chain", "reports", ("employee", "manager")),
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def zipf_keys(rng: np.random.Generator, population: np.ndarray, count: int, a: float = 1.1) -> list[int]:
    """`count` draws from `population`, its i-th element (in a shuffled order) with weight
    (i+1)^-a: a Zipf workload whose hot keys are spread over the layers or levels."""
    order = rng.permutation(population)
    cdf = np.cumsum(np.arange(1, len(order) + 1, dtype=np.float64) ** -a)
    picks = np.searchsorted(cdf / cdf[-1], rng.random(count), side="right")
    return [int(x) for x in order[np.minimum(picks, len(order) - 1)]]


def layered_graph(edges: int, seed: int) -> np.ndarray:
    """About `edges` distinct edges (x, y) as an (n, 2) int64 array; see the docstring."""
    rng = np.random.default_rng(seed)
    # Drawn for 30% more edges than asked: about that many are duplicates or fall off the
    # last layer; the surplus is cut at random at the end.
    wanted = int(edges * 1.3) + 8
    degree = np.minimum(rng.zipf(2.2, size=wanted), MAX_DEGREE)
    nodes = int(np.searchsorted(np.cumsum(degree), wanted)) + 1
    width = max(4, -(-nodes // LAYERS))
    degree = degree[: width * LAYERS]
    source = np.repeat(np.arange(len(degree), dtype=np.int64), degree)
    layer, position = source // width, source % width
    reach = np.maximum(4, degree[source])
    skip = 1 + (rng.random(len(source)) < 0.15) + (rng.random(len(source)) < 0.05)
    offset = rng.integers(-reach, reach + 1)
    target_layer = layer + skip
    keep = target_layer < LAYERS
    target = target_layer * width + (position + offset) % width
    pairs = np.unique(np.stack([source[keep], target[keep]], axis=1), axis=0)
    if len(pairs) > edges:
        pairs = pairs[np.sort(rng.choice(len(pairs), edges, replace=False))]
    return pairs


def org_tree(employees: int, seed: int) -> np.ndarray:
    """(employee, manager) pairs of a tree of `employees` employees, LEVELS levels deep."""
    rng = np.random.default_rng(seed)
    # Level sizes b^l, with b chosen so that they sum to about `employees`.
    lo, hi = 1.0001, 4.0
    for _ in range(60):
        b = (lo + hi) / 2
        if (b**LEVELS - 1) / (b - 1) < employees:
            lo = b
        else:
            hi = b
    sizes = np.maximum(1, np.round(b ** np.arange(LEVELS))).astype(np.int64)
    sizes[-1] = max(1, employees - int(sizes[:-1].sum()))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    ids = rng.permutation(int(starts[-1])).astype(np.int64)  # level l: ids[starts[l]:starts[l+1]]
    out = []
    for level in range(1, LEVELS):
        bosses = ids[starts[level - 1] : starts[level]]
        staff = ids[starts[level] : starts[level + 1]]
        cdf = np.cumsum(np.arange(1, len(bosses) + 1, dtype=np.float64) ** -1.5)
        picks = np.searchsorted(cdf / cdf[-1], rng.random(len(staff)), side="right")
        out.append(np.stack([staff, bosses[np.minimum(picks, len(bosses) - 1)]], axis=1))
    return np.concatenate(out)


def write_parquet(path: Path, pairs: np.ndarray, names: tuple[str, str]) -> Path:
    pq.write_table(pa.table({names[0]: pairs[:, 0], names[1]: pairs[:, 1]}), path)
    return path


class Adjacency:
    """The BFS floor: successor lists in a dict, kept up to date with the benchmark's writes."""

    def __init__(self, pairs: np.ndarray) -> None:
        self.succ: dict[int, list[int]] = {}
        for x, y in pairs.tolist():
            self.succ.setdefault(x, []).append(y)

    def closure(self, start: int) -> set[int]:
        """Every node reachable from `start` by one edge or more."""
        seen: set[int] = set()
        frontier = list(self.succ.get(start, ()))
        while frontier:
            node = frontier.pop()
            if node not in seen:
                seen.add(node)
                frontier.extend(self.succ.get(node, ()))
        return seen

    def add(self, x: int, y: int) -> None:
        self.succ.setdefault(x, []).append(y)

    def remove(self, x: int, y: int) -> None:
        self.succ[x].remove(y)

    def full_closure_rows(self, keys: Iterable[int] | None = None) -> int:
        """The sum of every node's closure (the rows a full recursive state holds)."""
        return sum(len(self.closure(k)) for k in (self.succ if keys is None else keys))


class Clingo:
    """clingo with the key as a constant: a fresh Control per lookup, grounding the facts
    (the same pairs) and the two rules with the key in place of the first attribute."""

    RULES = "r(Y) :- e({k}, Y).\nr(Z) :- r(Y), e(Y, Z).\n#show r/1.\n"

    def __init__(self, pairs: np.ndarray) -> None:
        self.facts = "".join(f"e({x},{y}).\n" for x, y in pairs.tolist())

    def closure(self, key: int) -> set[int]:
        import clingo

        control = clingo.Control(["--warn=none"])
        control.add("base", [], self.facts + self.RULES.format(k=key))
        control.ground([("base", [])])
        found: set[int] = set()

        def on_model(model: clingo.Model) -> None:
            found.update(s.arguments[0].number for s in model.symbols(shown=True))

        control.solve(on_model=on_model)
        return found


def clingo_available() -> bool:
    try:
        import clingo  # noqa: F401
    except ImportError:
        return False
    return True
