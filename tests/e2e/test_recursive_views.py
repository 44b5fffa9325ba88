"""Recursion, negation across strata and aggregation over a recursive relation, served
end to end: the real server, real Spark and gRPC, against plain Python over the same data."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import Client

from .server_process import ServerProcess

PROGRAM = """
source edge(src: int, dst: int).
source blocked(node: int).

% Paths that never enter a blocked node.
reach(src: X, dst: Y) :- edge(src: X, dst: Y), !blocked(node: Y).
reach(src: X, dst: Z) :- reach(src: X, dst: Y), edge(src: Y, dst: Z), !blocked(node: Z).

% How many nodes each source node reaches; 0 for a node with edges that reaches none.
fanout(src: X, n: N) :- edge(src: X), N := count : reach(src: X, dst: Y).

view reach(src).
view fanout(src).
"""

NODES = 12


def python_reach(edges: set[tuple[int, int]], blocked: set[int]) -> set[tuple[int, int]]:
    reach = {(x, y) for x, y in edges if y not in blocked}
    while True:
        more = {(x, z) for x, y in reach for y2, z in edges if y == y2 and z not in blocked} - reach
        if not more:
            return reach
        reach |= more


@pytest.fixture(scope="module")
def graph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = Path(tmp_path_factory.mktemp("graph"))
    program = folder / "graph.pomo"
    program.write_text(PROGRAM)
    server = ServerProcess(folder / "data", program=program).start()
    yield server
    server.stop()


def _check(db: Client, edges: set[tuple[int, int]], blocked: set[int], epoch: int) -> None:
    reach = python_reach(edges, blocked)
    for node in range(NODES):
        got = {(r["src"], r["dst"]) for r in db.lookup("reach", {"src": node}, min_epoch=epoch)}
        assert got == {(x, y) for x, y in reach if x == node}, f"reach from {node} at epoch {epoch}"
        fan = db.lookup("fanout", {"src": node}, min_epoch=epoch)
        has_edges = any(x == node for x, _ in edges)
        want = [{"src": node, "n": sum(1 for x, _ in reach if x == node)}] if has_edges else []
        assert fan == want, f"fanout of {node} at epoch {epoch}"


def test_recursive_view_with_negation_matches_python(graph_server: ServerProcess) -> None:
    rng = random.Random(20261121)
    edges: set[tuple[int, int]] = set()
    blocked: set[int] = set()
    with graph_server.client() as db:
        epoch = 0
        for step in range(12):
            insert = {(rng.randrange(NODES), rng.randrange(NODES)) for _ in range(6)}
            delete = set(rng.sample(sorted(edges), k=min(3, len(edges)))) - insert
            block = {rng.randrange(NODES)} if step % 3 == 1 else set()
            unblock = set(rng.sample(sorted(blocked), k=min(1, len(blocked)))) - block
            batch = {
                "edge": (
                    [{"src": x, "dst": y} for x, y in sorted(insert)],
                    [{"src": x, "dst": y} for x, y in sorted(delete)],
                ),
                "blocked": ([{"node": n} for n in block], [{"node": n} for n in unblock]),
            }
            epoch = db.write_batch(batch)
            edges = (edges - delete) | insert
            blocked = (blocked - unblock) | block
            if step % 4 == 0 or step == 11:
                _check(db, edges, blocked, epoch)
