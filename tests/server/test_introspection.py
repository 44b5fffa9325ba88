"""The built-in sources (planner/frontend/builtins.py, server/views/introspection.py), in
process over real Spark: a program reads the server's own state as relations.

- After lookups, writes and evictions, `pomoview_state`'s rows equal what Stats reports
  (each refresh is called here, as the introspection thread does every second).
- A view over them is maintained: a lookup of it answers the refreshed rows.
- No update storm: the states of the views over them are left out of them, so once
  nothing else changes a refresh finds nothing to step (seen failing without the rule).
- Writes and loads to a built-in source are refused, naming it, and change nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pomoview.server.errors import InvalidArgument
from pomoview.server.scheduler.scheduler import Scheduler

PROGRAM = """
source vote(article: int, user: int).
view votes(article).
votes(article: A, n: N) :- vote(article: A), N := count : vote(article: A).

view states(view).
states(view: V, node: N, rows: R) :- pomoview_state(view: V, node: N, rows: R).
view arranged(one).
arranged(one: 1, rows: T) :- T := sum R : pomoview_state(rows: R).
view epochs(applied).
epochs(applied: A, durable: D) :- pomoview_epochs(applied: A, durable: D).
"""


def typed(row: dict[str, object]) -> dict[str, tuple[str, object]]:
    """A row as the scheduler takes it from the wire: each value with its type."""
    return {a: ("int" if isinstance(v, int) else "string", v) for a, v in row.items()}


def stats_rows(scheduler: Scheduler, view: str) -> set[tuple[str, int]]:
    """(node, rows) of every stateful node serving `view`, as Stats reports them."""
    return {(s.id, s.rows) for s in scheduler.stats().states if s.stateful and view in s.views}


def refresh(scheduler: Scheduler) -> bool:
    with scheduler.view_state.lock:
        return scheduler.introspection.refresh()


def test_builtin_sources_equal_stats_and_do_not_feed_back(tmp_path: Path, spark: Any) -> None:
    scheduler = Scheduler(tmp_path / "data", lambda: spark, flush_interval=3600)
    scheduler.introspection.run = lambda: None  # type: ignore[method-assign]  # refreshed by hand
    scheduler.start()
    try:
        scheduler.install(PROGRAM)
        epoch = scheduler.write(
            [("vote", [typed({"article": a, "user": u}) for a in range(5) for u in range(a)], [])]
        )
        for article in (1, 3):
            rows, _ = scheduler.lookup("votes", [typed({"article": article})], min_epoch=epoch)
            assert rows == [[{"article": article, "n": article}]]
        refresh(scheduler)
        rows, _ = scheduler.lookup("states", [typed({"view": "votes"})])
        assert {(r["node"], r["rows"]) for r in rows[0]} == stats_rows(scheduler, "votes") != set()
        # Lookups of the views over them fill their states; those are left out, so the rows
        # stop changing: one refresh may still see the new views' shared states, then none.
        scheduler.lookup("arranged", [typed({"one": 1})])
        scheduler.lookup("epochs", [typed({"applied": epoch})])
        refresh(scheduler)
        assert not refresh(scheduler), "a refresh with nothing changed stepped the dataflow"
        # A write and an eviction change the votes view's states: the rows follow Stats.
        epoch = scheduler.write([("vote", [typed({"article": 1, "user": 99})], [])])
        scheduler.lookup("votes", [typed({"article": 4})], min_epoch=epoch)
        with scheduler.view_state.lock:
            graph = scheduler.view_state.graph
            assert graph is not None
            graph.graph.evict(1 << 40)  # every partial key
        assert refresh(scheduler)
        rows, _ = scheduler.lookup("states", [typed({"view": "votes"})])
        assert {(r["node"], r["rows"]) for r in rows[0]} == stats_rows(scheduler, "votes")
        total = sum(
            s.rows for s in scheduler.stats().states if s.stateful and s.id not in _introspective(scheduler)
        )
        assert scheduler.lookup("arranged", [typed({"one": 1})])[0] == [[{"one": 1, "rows": total}]]
        assert scheduler.lookup("epochs", [typed({"applied": epoch})])[0] == [
            [{"applied": epoch, "durable": epoch}]
        ]
        assert not refresh(scheduler)
        # Read-only.
        with pytest.raises(InvalidArgument, match="'pomoview_state' is a built-in source"):
            scheduler.write([("pomoview_state", [typed({"node": "n1"})], [])])
        assert scheduler.applied_epoch == epoch
    finally:
        scheduler.stop()


def _introspective(scheduler: Scheduler) -> set[str]:
    graph = scheduler.view_state.graph
    assert graph is not None
    return graph.graph.below(["pomoview_state", "pomoview_upqueries", "pomoview_epochs"])
