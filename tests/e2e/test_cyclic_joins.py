"""A cyclic rule body served end to end: the server's worst-case-optimal join against the
same server with `--binary-joins`, and both against Python, after inserts and deletes;
`explain` names the WcojJoin and its variable orders, and only where it is planned."""

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
