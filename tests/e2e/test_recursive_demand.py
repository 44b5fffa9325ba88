"""A recursive view looked up by key through the real server is served from demand:
Describe shows the DemandGate and the keys it demanded (the looked-up ones), writes that
make and break cycles change the demanded answers exactly (against a Python closure), and
evictions under a tiny memory budget retract the demand of the evicted keys while every
answer stays exact. (That the demanded states hold those keys' closures only is checked in
process, tests/planner/test_demand_readers.py: the recursion's nested circuit is not
measured by Describe yet.)"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pomoview.client import Client

from .server_process import ServerProcess, wait_for_flush

PROGRAM = """
source edge(src: int, dst: int).
view reach(src).
reach(src: X, dst: Y) :- edge(src: X, dst: Y).
reach(src: X, dst: Z) :- reach(src: X, dst: Y), edge(src: Y, dst: Z).
"""


def closure(edges: set[tuple[int, int]], start: int) -> set[tuple[int, int]]:
    seen: set[int] = set()
    frontier = [y for x, y in edges if x == start]
    while frontier:
        node = frontier.pop()
        if node not in seen:
            seen.add(node)
            frontier += [y for x, y in edges if x == node]
    return {(start, y) for y in seen}


def gate_of(db: object) -> dict[str, object]:
    nodes = db.describe("reach")["nodes"]  # type: ignore[attr-defined]
    (gate,) = [n for n in nodes if n["operator"] == "DemandGate"]
    return gate


@contextmanager
def sliced(tmp_path: Path, edges: set[tuple[int, int]]) -> Iterator[tuple[Client, int]]:
    """A server whose edges are read through a slice (`--whole-source-rows 0`), holding
    `edges` in Parquet (flushed, so a lookup must fetch them): its client and their epoch."""
    program = tmp_path / "reach.pomo"
    program.write_text(PROGRAM)
    server = ServerProcess(tmp_path / "data", program=program, extra_args=["--whole-source-rows", "0"])
    server.start()
    try:
        with server.client() as db:
            epoch = db.write("edge", insert=[{"src": x, "dst": y} for x, y in edges])
            wait_for_flush(db, epoch)
            yield db, epoch
    finally:
        server.stop()


def test_a_recursive_view_by_key_demands_the_looked_up_keys(tmp_path: Path) -> None:
    program = tmp_path / "reach.pomo"
    program.write_text(PROGRAM)
    # Ten rings of ten nodes: a key's closure is its ring, the graph's is ten times that.
    edges = {(r * 10 + i, r * 10 + (i + 1) % 10) for r in range(10) for i in range(10)}
    server = ServerProcess(tmp_path / "data", program=program).start()
    try:
        with server.client() as db:
            epoch = db.write("edge", insert=[{"src": x, "dst": y} for x, y in edges])
            for key in (3, 27, 99):
                got = {(r["src"], r["dst"]) for r in db.lookup("reach", {"src": key}, min_epoch=epoch)}
                assert got == closure(edges, key) and len(got) == 10
            gate = gate_of(db)
            assert "3 demanded" in str(gate["detail"]), gate
            assert "reads edge whole" in str(gate["detail"]), gate  # 100 edges, not flushed yet: 0 counted
            reader = next(n for n in db.describe("reach")["nodes"] if n["operator"] == "Reader")
            assert reader["partial"] and reader["present_keys"] == 3
            # Break ring 0 (3's) and join ring 2 (27's) to ring 9 (99's).
            epoch = db.write("edge", delete=[{"src": 5, "dst": 6}], insert=[{"src": 21, "dst": 95}])
            edges = (edges - {(5, 6)}) | {(21, 95)}
            for key in (3, 27, 99):
                got = {(r["src"], r["dst"]) for r in db.lookup("reach", {"src": key}, min_epoch=epoch)}
                assert got == closure(edges, key), key
            # An eviction by name (Evict) retracts the key's demand, as the budget's do.
            assert db.evict("reach", [{"src": 3}])["keys_evicted"] == 1
            assert demand_counts(db) == (2, 1)
            got = {(r["src"], r["dst"]) for r in db.lookup("reach", {"src": 3})}
            assert got == closure(edges, 3) and demand_counts(db) == (3, 1)
            db.evict()
            assert demand_counts(db) == (0, 4)
    finally:
        server.stop()


def demand_counts(db: Client) -> tuple[int, int]:
    """The gate's keys demanded and released so far ("..., N demanded, M released)")."""
    demanded, released = (int(part.split()[0]) for part in str(gate_of(db)["detail"]).split(", ")[-2:])
    return demanded, released


def test_evictions_under_a_tiny_budget_retract_demand_and_answers_stay_exact(tmp_path: Path) -> None:
    program = tmp_path / "reach.pomo"
    program.write_text(PROGRAM)
    rng = random.Random(3)
    edges = {(rng.randrange(60), rng.randrange(60)) for _ in range(90)}
    server = ServerProcess(tmp_path / "data", program=program, extra_args=["--memory-budget", "1K"]).start()
    try:
        with server.client() as db:
            epoch = db.write("edge", insert=[{"src": x, "dst": y} for x, y in edges])
            for round_ in range(4):
                for key in rng.sample(range(62), 15):
                    rows = db.lookup("reach", {"src": key}, min_epoch=epoch)
                    assert {(r["src"], r["dst"]) for r in rows} == closure(edges, key), (round_, key)
                # A write: the budget is enforced after each applied step.
                new = {(rng.randrange(60), rng.randrange(60)) for _ in range(3)} - edges
                old = set(rng.sample(sorted(edges), 2))
                epoch = db.write(
                    "edge",
                    insert=[{"src": x, "dst": y} for x, y in new],
                    delete=[{"src": x, "dst": y} for x, y in old],
                )
                edges = (edges | new) - old
            stats = db.stats()
            assert stats["memory"]["eviction_rounds"] > 0, stats["memory"]
            gate = gate_of(db)
            reader = next(n for n in db.describe("reach")["nodes"] if n["operator"] == "Reader")
            # "..., N demanded, M released)": every key evicted below was released, and the
            # evictions (RSS-driven: when they come is the budget's) released some.
            demanded, released = (int(part.split()[0]) for part in str(gate["detail"]).split(", ")[-2:])
            assert demanded == reader["present_keys"] and released > 0, (gate, reader)
    finally:
        server.stop()


def test_sources_inside_the_recursion_are_fetched_by_demand_one_job_per_level(tmp_path: Path) -> None:
    """With `--whole-source-rows 0` the edges are read through a slice: a key's closure
    costs one keyed Spark job per level of its depth (not one per node, nor a scan of the
    whole source), the slice holds the closure's edges only, and a write that reaches nodes
    never fetched still gives exact answers."""
    tree = {(p, c) for p in range(1, 32) for c in (2 * p, 2 * p + 1)}  # depth 5 below 1
    others = {(100 + i, 101 + i) for i in range(50)}  # a chain no lookup below reaches
    edges = tree | others
    with sliced(tmp_path, edges) as (db, epoch):  # counted by the store: 162 rows, more than 0
        before = db.stats()["spark_jobs"]
        rows = db.lookup("reach", {"src": 1}, min_epoch=epoch)
        jobs = db.stats()["spark_jobs"] - before
        assert {(r["src"], r["dst"]) for r in rows} == closure(edges, 1)
        assert 6 <= jobs <= 7, jobs  # levels 1, 2-3, ..., 32-63 (the leaves have no edges)
        nodes = db.describe("reach")["nodes"]
        (piece,) = [n for n in nodes if n["operator"] == "SourceSlice"]
        assert "63 fetched" in str(piece["detail"]) and piece["rows"] == 62, piece
        assert "reads edge by slice" in str(gate_of(db)["detail"])
        # Warm, and a key inside the fetched closure: no job.
        before = db.stats()["spark_jobs"]
        for key in (1, 4):
            rows = db.lookup("reach", {"src": key})
            assert {(r["src"], r["dst"]) for r in rows} == closure(edges, key)
        assert db.stats()["spark_jobs"] == before
        # A leaf of 1's closure now reaches the chain, whose edges were never fetched.
        epoch = db.write("edge", insert=[{"src": 40, "dst": 120}])
        edges |= {(40, 120)}
        for key in (1, 4, 120):
            rows = db.lookup("reach", {"src": key}, min_epoch=epoch)
            assert {(r["src"], r["dst"]) for r in rows} == closure(edges, key), key


def test_the_budget_is_enforced_after_lookups_filled_in_memory(tmp_path: Path) -> None:
    """Sources read whole (one Spark job, at the view's first lookup), so every other cold
    lookup is answered in memory: the budget is still enforced after them, without a write."""
    program = tmp_path / "reach.pomo"
    program.write_text(PROGRAM)
    edges = {(r * 10 + i, r * 10 + (i + 1) % 10) for r in range(30) for i in range(10)}
    server = ServerProcess(tmp_path / "data", program=program, extra_args=["--memory-budget", "1K"]).start()
    try:
        with server.client() as db:
            epoch = db.write("edge", insert=[{"src": x, "dst": y} for x, y in edges])
            db.lookup("reach", {"src": 0}, min_epoch=epoch)
            jobs = db.stats()["spark_jobs"]
            for key in range(1, 300, 7):
                rows = db.lookup("reach", {"src": key})
                assert {(r["src"], r["dst"]) for r in rows} == closure(edges, key), key
            stats = db.stats()
            assert stats["spark_jobs"] == jobs  # answered in memory
            assert stats["memory"]["eviction_rounds"] > 0, stats["memory"]
            detail = str(gate_of(db)["detail"])
            assert "released" in detail and " 0 released" not in detail, detail
    finally:
        server.stop()


def test_a_subscribed_key_gets_the_rows_a_write_makes_its_slice_fetch(tmp_path: Path) -> None:
    """A subscription to a recursive view's key, its edges read through a slice: a write that
    joins the key's closure to a chain the slice never fetched reaches the subscriber whole
    (the chain's rows too), with no lookup after it; the server fills what the slice lacks
    right after the step (Lookups.settle). The folded changes equal a Python closure."""
    edges = {(1, 2), (2, 3), (1, 4)} | {(100 + i, 101 + i) for i in range(4)}  # 100..104, unread
    with sliced(tmp_path, edges) as (db, _):  # the chain is in Parquet: the slice must fetch it
        folded: set[tuple[int, int]] = set()
        want = closure(edges | {(3, 100)}, 1)
        snapshot, reached = threading.Event(), threading.Event()
        errors: list[BaseException] = []
        sub = db.subscribe("reach", [{"src": 1}])

        def follow() -> None:
            try:
                for change in sub:
                    folded.difference_update((r["src"], r["dst"]) for r in change.deletes)
                    folded.update((r["src"], r["dst"]) for r in change.inserts)
                    if change.snapshot:
                        assert folded == closure(edges, 1), folded
                        snapshot.set()
                    elif folded == want:
                        reached.set()
            except BaseException as err:  # noqa: BLE001 (the test reports it)
                errors.append(err)
                snapshot.set()
                reached.set()

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        assert snapshot.wait(60) and not errors, errors
        db.write("edge", insert=[{"src": 3, "dst": 100}])
        assert reached.wait(60), f"the subscription has {sorted(folded)}, not {sorted(want)}"
        assert not errors, errors
        sub.close()
        follower.join(10)
