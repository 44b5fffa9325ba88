"""A cyclic rule body served end to end: the server's worst-case-optimal join against the
same server with `--binary-joins`, and both against Python, after inserts and deletes;
`explain` names the WcojJoin and its variable orders, and only where it is planned. The
same for a cycle through a recursion (a NestedWcoj inside the loop, looked up by key: the
demand rewrite's copy)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import Client
from pomoview.server.cli.commands import main

from .server_process import ServerProcess

PROGRAM = """
source edge(src: int, dst: int).

% The triangles a -> b -> c with the shortcut a -> c, a before b.
tri(a: A, b: B, c: C) :- edge(src: A, dst: B), edge(src: B, dst: C), edge(src: A, dst: C), A < B.

view tri(a).

source hop(src: int, dst: int).
source ok(src: int, dst: int).

% Paths from a along hops, each landing on a target (a, c) that ok allows: the triangle
% cr(A, B), hop(B, C), ok(A, C) closes through the recursion (a NestedWcoj in the loop).
cr(x: A, y: B) :- hop(src: A, dst: B).
cr(x: A, y: C) :- cr(x: A, y: B), hop(src: B, dst: C), ok(src: A, dst: C).

view cr(x).
"""

NODES = 8


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    folder = Path(tmp_path_factory.mktemp("cyclic"))
    program = folder / "tri.pomo"
    program.write_text(PROGRAM)
    started: dict[str, ServerProcess] = {}
    try:
        for name, flags in (("wcoj", []), ("binary", ["--binary-joins"])):
            started[name] = ServerProcess(folder / name, program=program, extra_args=flags).start()
        yield started
    finally:
        for server in started.values():
            server.stop()


def _triangles(edges: set[tuple[int, int]]) -> set[tuple[int, int, int]]:
    return {(a, b, c) for a, b in edges for b2, c in edges if b == b2 and (a, c) in edges and a < b}


def _lookups(db: Client, epoch: int) -> set[tuple[int, int, int]]:
    got = db.lookup_many("tri", [{"a": a} for a in range(NODES)], min_epoch=epoch)
    return {(r["a"], r["b"], r["c"]) for rows in got.values() for r in rows}


def test_wcoj_and_binary_joins_agree_and_explain_names_the_operator(
    servers: dict[str, ServerProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(20261126)
    edges: set[tuple[int, int]] = set()
    clients = {name: server.client() for name, server in servers.items()}
    try:
        for step in range(6):
            insert = {(rng.randrange(NODES), rng.randrange(NODES)) for _ in range(12)}
            delete = set(rng.sample(sorted(edges), k=min(4, len(edges)))) - insert
            edges = (edges - delete) | insert
            for db in clients.values():
                epoch = db.write(
                    "edge",
                    insert=[{"src": a, "dst": b} for a, b in sorted(insert)],
                    delete=[{"src": a, "dst": b} for a, b in sorted(delete)],
                )
                if step % 2 == 1:
                    assert _lookups(db, epoch) == _triangles(edges), f"step {step}"
        details = {
            name: [str(n["detail"]) for n in db.describe("tri")["nodes"]]  # type: ignore[union-attr]
            for name, db in clients.items()
        }
    finally:
        for db in clients.values():
            db.close()
    assert [d for d in details["wcoj"] if d.startswith("WcojJoin(")] == [
        "WcojJoin(edge(A, B), edge(B, C), edge(A, C), A < B; orders edge(A, B): A B -> C; "
        "edge(B, C): B C -> A; edge(A, C): A C -> B; full)"
    ]
    assert not any(d.startswith("WcojJoin") for d in details["binary"])
    capsys.readouterr()
    assert main(["explain", "tri", "--text", "--address", servers["wcoj"].address]) == 0
    assert "WcojJoin(edge(A, B), edge(B, C), edge(A, C), A < B; orders" in capsys.readouterr().out


def _closure_through(edges: set[tuple[int, int]], ok: set[tuple[int, int]]) -> set[tuple[int, int]]:
    out = set(edges)
    frontier = set(edges)
    while frontier:
        frontier = {(a, c) for a, b in frontier for b2, c in edges if b2 == b and (a, c) in ok} - out
        out |= frontier
    return out


def test_a_cycle_through_a_recursion_agrees_with_binary_joins_and_python(
    servers: dict[str, ServerProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(20261207)
    present: dict[str, set[tuple[int, int]]] = {"hop": set(), "ok": set()}
    clients = {name: server.client() for name, server in servers.items()}
    try:
        for step in range(5):
            for source, db_rows in present.items():
                insert = {(rng.randrange(NODES), rng.randrange(NODES)) for _ in range(10)}
                delete = set(rng.sample(sorted(db_rows), k=min(3, len(db_rows)))) - insert
                present[source] = (db_rows - delete) | insert
                for db in clients.values():
                    epoch = db.write(
                        source,
                        insert=[{"src": a, "dst": b} for a, b in sorted(insert)],
                        delete=[{"src": a, "dst": b} for a, b in sorted(delete)],
                    )
            want = _closure_through(present["hop"], present["ok"])
            for name, db in clients.items():
                got = db.lookup_many("cr", [{"x": x} for x in range(NODES)], min_epoch=epoch)
                assert {(r["x"], r["y"]) for rows in got.values() for r in rows} == want, (name, step)
    finally:
        for db in clients.values():
            db.close()
    explained = {}
    for name, server in servers.items():
        capsys.readouterr()
        assert main(["explain", "cr", "--text", "--address", server.address]) == 0
        explained[name] = capsys.readouterr().out
    nested = "NestedWcoj(cr__bf(A, B), m__cr__bf(A), hop(B, C), ok(A, C)"
    assert nested in explained["wcoj"], explained["wcoj"]
    assert "NestedWcoj" not in explained["binary"]
