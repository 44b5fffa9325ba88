"""Stratification (pomo_logic.txt §2.3): precedence graph -> SCCs -> condensation -> order.

A small pure pass. Its input is the precedence graph of a program's DEDUCTIVE
rules, restricted to derived relations (a source has no rules, so it can never
be part of a cycle and needs no stratum):

- an edge `head -> body` for each body literal of a deductive rule whose atom
  is over a derived relation; it is positive for an atom or `C := atom`, and
  negative for `!atom` or an aggregate's atom.

Inductive (`@next`) rules add no edges: their bodies are read at the previous
epoch, which is the final, temporal stratum of §2.3 step 4 (the engine runs
them after every deductive stratum). A relation with only inductive rules is
still a node, so it still gets a stratum.

The output is the list of strata in evaluation order (dependencies first): one
per strongly connected component. Tarjan's algorithm already emits the SCCs of
a graph whose edges point at dependencies in that order (an SCC is emitted
after every SCC it reaches), which is a topological sort of the condensation.
It is written iteratively so that a program with a very long chain of rules
does not hit Python's recursion limit.

A program cannot be stratified when an edge inside an SCC is negative; such
edges come back as `Unstratifiable` values, each with a cycle through it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pomoview.planner.frontend.errors import Position


@dataclass(frozen=True)
class Edge:
    """`head` depends on `body` (negatively for `!atom` and aggregates)."""

    head: str
    body: str
    negative: bool
    position: Position  # of the body literal that makes the edge
    kind: str = "atom"  # "atom" | "content id" | "negation" | "aggregate"


@dataclass(frozen=True)
class Stratum:
    relations: tuple[str, ...]
    recursive: bool  # more than one relation, or a relation that depends on itself


@dataclass(frozen=True)
class Unstratifiable:
    """A negative edge inside an SCC; `cycle` starts and ends at `edge.head`."""

    edge: Edge
    cycle: tuple[str, ...]

    def describe(self, limit: int = 0) -> str:
        """`p -> q -> p`; with `limit`, a longer cycle keeps its ends around a `...`."""
        names = list(self.cycle)
        if limit and len(names) > limit:
            names = [*names[: limit // 2], "...", *names[-(limit - limit // 2) :]]
        return " -> ".join(names)


def components(nodes: Sequence[str], edges: Iterable[Edge]) -> list[list[str]]:
    """The SCCs of the graph (iterative Tarjan), dependencies first.

    Nodes keep their given order inside a component; edges to unknown nodes are
    ignored (they point at sources)."""
    rank = {n: i for i, n in enumerate(nodes)}
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        if e.head in succ and e.body in succ and e.body not in succ[e.head]:
            succ[e.head].append(e.body)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        # Each frame is (node, position of the next successor to visit).
        work: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, i = work[-1]
            if i < len(succ[node]):
                work[-1] = (node, i + 1)
                nxt = succ[node][i]
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                scc: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    scc.append(member)
                    if member == node:
                        break
                out.append(sorted(scc, key=rank.__getitem__))
    return out


def _path(succ: dict[str, list[str]], start: str, goal: str, within: set[str]) -> list[str]:
    """A shortest path start -> ... -> goal inside `within` (BFS; one exists in an SCC)."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for nxt in succ.get(node, ()):
            if nxt in within and nxt not in parent:
                parent[nxt] = node
                queue.append(nxt)
    path: list[str] = []
    cur: str | None = goal
    while cur is not None:
        path.append(cur)
        cur = parent[cur]
    return path[::-1]


def stratify(
    nodes: Sequence[str], edges: Sequence[Edge]
) -> tuple[list[Stratum], list[Unstratifiable]]:
    """Strata in evaluation order, and every negative edge that lies inside an SCC."""
    sccs = components(nodes, edges)
    where = {n: i for i, scc in enumerate(sccs) for n in scc}
    self_loops = {e.head for e in edges if e.head == e.body and e.head in where}
    strata = [
        Stratum(tuple(scc), len(scc) > 1 or scc[0] in self_loops) for scc in sccs
    ]
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e.head, []).append(e.body)
    bad: list[Unstratifiable] = []
    for e in edges:
        if e.negative and e.head in where and where.get(e.body) == where[e.head]:
            back = _path(succ, e.body, e.head, set(sccs[where[e.head]]))
            bad.append(Unstratifiable(e, (e.head, *back)))
    return strata, bad
