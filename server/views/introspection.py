"""The built-in sources' rows (planner/frontend/builtins.py): the server's own state as
relations that programs join, aggregate, look up and subscribe to.

- What they hold: `pomoview_state` a row per stateful node and view it serves, as Stats and
  Describe report it (a state shared by views: a row each; a node that serves none: view
  ""); `pomoview_upqueries` a row per node; `pomoview_epochs` one row.
- When they change: on a tick (`refresh`, at most `TICK` seconds apart, from the
  scheduler's introspection thread), not at every epoch. A refresh recomputes the rows,
  takes the difference from the rows the dataflow holds, and applies it as one step between
  epochs, reported at the applied epoch (introspection is not versioned by epochs: a
  lookup's `min_epoch` says nothing of it). Subscribers get the step's changes.
- What the dataflow holds of them is always `current`: their source indexes fetch from it
  (under the lock, no Spark job), and each refresh steps exactly from `current` to the new
  rows before it replaces `current`.
- No update storm: a view over these sources has states whose sizes change when the rows
  change, which would change the rows again at the next tick, for ever. The states that
  read a built-in source (directly or below one that does) are therefore left out of
  `pomoview_state` and `pomoview_upqueries`: the rows depend only on the rest of the
  dataflow and the epochs, so on a quiet server a refresh after the last change finds no
  difference and steps nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from typing import Any

from pomoview.dataflow.graph import Graph
from pomoview.dataflow.node import Filters, fetch_from
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram
from pomoview.planner.frontend.builtins import BUILTIN_SOURCES
from pomoview.server.views.view_state import ViewState

log = logging.getLogger(__name__)

TICK = 1.0  # seconds between refreshes


class Introspection:
    def __init__(self, view: ViewState, flushed: Callable[[], int], stopping: threading.Event) -> None:
        self._view = view
        self._flushed = flushed  # the store's version: the last flushed epoch
        self._stopping = stopping  # ends `run`
        self.current: dict[str, set[Row]] = {name: set() for name in BUILTIN_SOURCES}
        self.steps = 0  # refreshes that changed something

    def fetch(
        self, source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
    ) -> list[Row] | None:
        """The dataflow's fetch of a built-in source (its rows now), or None for any other
        relation. Caller holds the dataflow lock."""
        if source not in BUILTIN_SOURCES:
            return None
        schema = [a for a, _ in BUILTIN_SOURCES[source]]
        return fetch_from(self.current[source], schema, cols, keys, filters)

    def refresh(self) -> bool:
        """Steps the dataflow to the rows now, if the program reads a built-in source and they
        changed; returns whether they did. Caller holds the dataflow lock."""
        view = self._view
        used, graph = self.used(view.program), view.graph
        if not used or graph is None:
            return False
        rows = self.rows(graph.graph, used)
        changes: dict[str, ZSet[Row]] = {}
        for name in used:
            old, new = self.current[name], rows[name]
            if old != new:
                changes[name] = ZSet([(r, 1) for r in new - old] + [(r, -1) for r in old - new])
        for name in used:
            self.current[name] = rows[name]
        if not changes:
            return False
        self._step(changes)
        self.steps += 1
        return True

    def _step(self, changes: dict[str, ZSet[Row]]) -> None:
        view = self._view
        assert view.graph is not None
        epoch = view.applied_epoch
        view.begin_apply()
        try:
            view.graph.step(changes)
        except Exception:
            # Operator state is a cache: a new graph refills from the sources and `current`.
            log.exception("the dataflow failed at a step of the built-in sources; it will be rebuilt")
            view.reset_graph()
        finally:
            view.end_apply(epoch)
        view.subscriptions.seal(epoch)
        view.lock.notify_all()

    def run(self) -> None:
        """Refreshes every `TICK` seconds until the server stops (the introspection thread)."""
        while not self._stopping.wait(TICK):
            if not self.used(self._view.program):  # no hold of the lock for nothing
                continue
            with self._view.lock:
                self.refresh()

    @staticmethod
    def used(program: CompiledProgram | None) -> list[str]:
        """The built-in sources `program` reads. Also called without the dataflow lock: a
        program is replaced whole at an install, never changed."""
        if program is None:
            return []
        return [n for n, r in program.relations.items() if r.kind == "builtin"]

    def rows(self, graph: Graph[Any], used: Collection[str]) -> dict[str, set[Row]]:
        """Each built-in source's rows now (see the module docstring)."""
        view = self._view
        left_out = graph.below(used)
        state: set[Row] = set()
        upqueries: set[Row] = set()
        for info in graph.node_infos():
            if info.id in left_out:
                continue
            upqueries.add((info.id, info.upqueries, info.evictions, info.dropped))
            if info.stateful:
                key = ",".join(info.key)
                for served in info.views or [""]:
                    state.add(
                        (
                            info.id,
                            served,
                            info.operator,
                            key,
                            info.partial,
                            info.present_keys,
                            info.rows,
                            info.bytes,
                        )
                    )
        epochs: set[Row] = {(view.applied_epoch, view.durable_epoch, self._flushed())}
        return {"pomoview_state": state, "pomoview_upqueries": upqueries, "pomoview_epochs": epochs}
