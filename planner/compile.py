"""The planner's front door: program text -> a CompiledProgram that builds readers.

Passes, each a function from one IR to the next: parse (text -> AST), validate
(AST -> CheckedProgram, stratification included), lower (CheckedProgram ->
PomoRA Plan), the Distinct of a relation already a set dropped (PomoRA -> PomoRA,
ir/sets.py), cyclic bodies as n-way joins (PomoRA -> PomoRA, ir/cyclic.py, run by the
builder unless `binary_joins`), provenance (PomoRA -> KeyedPlan: which key each operator is kept by),
build (KeyedPlan -> nodes of the program's one graph, lazily, at the first lookup of a
reader: 3DF's lazy synthesis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.graph import Graph
from pomoview.dataflow.node import Fetch, FetchRequest, FetchWindow, Filters
from pomoview.dataflow.operators.demand_gate import DemandGate
from pomoview.dataflow.operators.reader import Reader
from pomoview.dataflow.operators.source_window import SourceWindow
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.upquery import Ask, Walk
from pomoview.dataflow.zset import ZSet
from pomoview.planner.builder.circuit_builder import CircuitBuilder
from pomoview.planner.demand.readers import DemandedReaders
from pomoview.planner.frontend import ast
from pomoview.planner.frontend.parse import parse
from pomoview.planner.frontend.validate import CheckedProgram, Relation, validate
from pomoview.planner.ir import ra
from pomoview.planner.ir.lower import Plan, lower
from pomoview.planner.ir.sets import drop_set_distincts

# A user-defined aggregate: the group's distinct argument tuples (sorted) -> a value,
# or None for "no result" (the rule does not fire for that group).
AggregateFunction = Callable[[list[tuple[Any, ...]]], object]
# A reader's name in a program's graph: (view, key attributes).
ViewKey = tuple[str, tuple[str, ...]]


@dataclass
class CompiledProgram:
    checked: CheckedProgram
    plan: Plan
    aggregates: Mapping[str, AggregateFunction] = field(default_factory=dict)

    @property
    def exprs(self) -> dict[str, ra.Expr]:
        return self.plan.exprs

    @property
    def text(self) -> str:
        return self.checked.text

    @property
    def relations(self) -> dict[str, Relation]:
        return self.checked.relations

    @property
    def views(self) -> dict[str, tuple[str, ...]]:
        return self.checked.views

    @property
    def hidden_sources(self) -> dict[str, tuple[str, ...]]:
        """Source-like relations the program's runner must feed: `p@next` -> p's attributes."""
        return self.plan.hidden

    @property
    def inductive(self) -> dict[str, str]:
        """p -> `p@ind`: the relation whose value at epoch t is `p@next` at t+1."""
        return self.plan.inductive

    def source_schema(self, name: str) -> tuple[tuple[str, str], ...]:
        relation = self.relations[name]
        return tuple((a, relation.types[a]) for a in relation.attributes)

    def build_reader(
        self,
        view: str,
        key: tuple[str, ...],
        fetch: Fetch,
        *,
        partial: bool = True,
        binary_joins: bool = False,
    ) -> Circuit:
        """A hydrated circuit answering `view` (a derived or `p@ind` relation) by `key`;
        with `partial=False` every state is full (the fully materialized reference); with
        `binary_joins` no cyclic body is a WcojJoin (planner/ir/cyclic.py)."""
        builder = CircuitBuilder(
            self.relations,
            self.plan.exprs,
            fetch,
            hidden=self.plan.hidden,
            aggregates=self.aggregates,
            partial=partial,
            binary_joins=binary_joins,
        )
        return builder.reader(view, key, self.checked.view_orders.get(view))


# Keys of ordered views' windows evicted short: (view, key attributes, keys).
ShortWindows = list[tuple[str, tuple[str, ...], list[Key]]]


class ProgramGraph:
    """The one dataflow graph of a program (DESIGN §3), shared by all of its readers.

    A reader (view, key attributes) is built at its first lookup, over the nodes earlier
    readers built (one state per operator and key columns); nothing is built before.
    `partial=False` makes every state full: the fully materialized reference.
    `binary_joins` plans every rule body as a chain of binary joins, cyclic ones too (no
    WcojJoin, planner/ir/cyclic.py): `serve --binary-joins`, to compare the two.
    """

    def __init__(
        self,
        program: CompiledProgram,
        *,
        partial: bool = True,
        hold_whole: Callable[[str], bool] | None = None,
        binary_joins: bool = False,
    ) -> None:
        """`hold_whole(source)`: whether a recursive view's demanded rules read `source`
        whole rather than through a slice fetched by demand (planner/demand/readers.py);
        None holds every source whole."""
        self.program = program
        self.partial = partial
        self.binary_joins = binary_joins
        self.graph: Graph[ViewKey] = Graph()
        self._builder = CircuitBuilder(
            program.relations,
            program.plan.exprs,
            _no_fetch,
            hidden=program.plan.hidden,
            aggregates=program.aggregates,
            partial=partial,
            binary_joins=binary_joins,
        )
        # Readers of recursive views by key, served from demand (planner/demand/).
        self.demands = DemandedReaders(
            program.checked, self._builder, self.graph.step_demand, hold_whole or _hold_all
        )

    def reader(self, view: str, key: tuple[str, ...], fetch: Fetch) -> Reader | list[FetchRequest]:
        """The reader of `view` by `key`, built (and its new full states hydrated through
        `fetch`) if it is new; or the fetches its new full states need first, and then
        nothing is kept."""
        name = (view, key)
        reader = self.graph.readers.get(name)
        if reader is not None:
            return reader
        fetch = self.demands.fetch(fetch)
        self._builder.fetch = fetch
        order = self.program.checked.view_orders.get(view)
        try:
            demanded = self.demands.plan(view, key) if self.partial else None
            if demanded is None:
                reader = self._builder.reader_node(view, key, order)
            else:
                relation, gate = demanded
                reader = self._builder.reader_node(relation, key, order, gate=gate)
            misses = self.graph.add(name, view, reader, fetch)
        except BaseException:
            self._builder.rollback()
            raise
        if misses:
            self._builder.rollback()
            return misses
        self._builder.commit()
        return reader

    def start_lookup(
        self, view: str, key: tuple[str, ...], keys: Sequence[Key], *, whole: bool = False
    ) -> PendingLookup:
        """A lookup of `keys` of `view` by `key`, to run in rounds (`PendingLookup.advance`);
        `whole`: a subscription's, whose keys the reader's states must hold whole (an
        ordered view's SourceWindow holds only the first rows of a key otherwise)."""
        return PendingLookup(self, view, key, list(keys), whole=whole)

    def lookup(self, view: str, key: tuple[str, ...], keys: Sequence[Key], fetch: Fetch) -> list[list[Row]]:
        """The view's rows for each key, in one round: for a fetch that always answers (the
        in-process engine, tests). The server runs `start_lookup` in rounds instead."""
        result = self.start_lookup(view, key, keys).advance(fetch)
        if result.rows is None:
            raise AssertionError(f"a lookup whose fetch always answers missed: {result.misses}")
        return result.rows

    def step(self, changes: Mapping[str, ZSet[Row]]) -> None:
        self.graph.step(changes)

    def take_unsettled(self) -> list[DemandGate]:
        """The demand gates the steps since the last call left with keys pinned by
        subscriptions whose slices lack rows (`Graph.take_unsettled`): the server settles
        each in the background (`start_settle`)."""
        return self.graph.take_unsettled()

    def start_settle(self, gate: DemandGate) -> PendingSettle:
        """`gate`'s fill of what its slices lack, to run in rounds as a lookup is."""
        return PendingSettle(self, gate)

    def short_windows(self) -> ShortWindows:
        """The keys of ordered views whose windows the steps since the last call evicted
        short (a SourceWindow that deletes left fewer than `limit` rows), as (view, key
        attributes, keys): the server looks them up again in the background."""
        out: ShortWindows = []
        for (view, key), reader in self.graph.readers.items():
            window = reader.inputs[0] if reader.inputs else None
            if isinstance(window, SourceWindow):
                keys = window.take_short()
                if keys:
                    out.append((view, key, keys))
        return out


@dataclass
class LookupResult:
    """One round of a lookup (ReadySet's `ProcessingResult { results, misses }`): the rows
    of each key, or None and the fetches to get ready before the next round."""

    rows: list[list[Row]] | None
    misses: list[FetchRequest]
    steps: int  # node visits this round


class PendingLookup:
    """A lookup in rounds. Each `advance` runs with the fetches at hand and returns the rows,
    or the misses of the round; the caller gets those ready (without the dataflow lock) and
    calls `advance` again, which resumes the walk where it stopped (upquery.py). The reader
    is built at the first round whose full states' fetches are at hand."""

    def __init__(
        self, graph: ProgramGraph, view: str, key: tuple[str, ...], keys: list[Key], *, whole: bool = False
    ) -> None:
        self.graph = graph
        self.whole = whole
        self.view = view
        self.key = key
        self.keys = keys
        self.rounds = 0
        self.steps = 0  # node visits over every round
        self._walk: Walk | None = None

    def advance(self, fetch: Fetch, fetch_window: FetchWindow | None = None) -> LookupResult:
        """One round; `fetch_window` answers the windowed fetches of ordered views (without
        one, a SourceWindow fetches its keys whole and cuts them)."""
        self.rounds += 1
        graph = self.graph.graph
        fetch = self.graph.demands.fetch(fetch)
        graph.set_fetch(fetch, fetch_window)
        if self._walk is None:
            reader = self.graph.reader(self.view, self.key, fetch)
            if not isinstance(reader, Reader):
                return LookupResult(None, reader, 0)
            graph.set_fetch(fetch, fetch_window)  # the new source indexes too
            if self.whole:
                reader.want_whole(self.keys)
            self._walk = Walk(Ask(reader.lookup_step, (self.keys,)))
        result = self._walk.advance(graph.token)
        self.steps += result.steps
        if not result.done:
            return LookupResult(None, result.misses, result.steps)
        return LookupResult(result.answer, [], result.steps)


class PendingSettle:
    """A demand gate's fill for the keys pinned below it (`DemandGate.settle_step`), in
    rounds like a lookup's; it answers no rows (an empty list), only fills: the rows reach
    the pinned keys' readers, and their subscriptions, through the dataflow."""

    def __init__(self, graph: ProgramGraph, gate: DemandGate) -> None:
        self.graph = graph
        self.rounds = 0
        self.steps = 0
        self._walk = Walk(Ask(gate.settle_step, ()))

    def advance(self, fetch: Fetch, fetch_window: FetchWindow | None = None) -> LookupResult:
        self.rounds += 1
        graph = self.graph.graph
        graph.set_fetch(self.graph.demands.fetch(fetch), fetch_window)
        result = self._walk.advance(graph.token)
        self.steps += result.steps
        if not result.done:
            return LookupResult(None, result.misses, result.steps)
        return LookupResult([], [], result.steps)


def _hold_all(source: str) -> bool:
    return True


def _no_fetch(source: str, columns: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
    raise AssertionError(f"{source} was fetched before the graph set a fetch")


def compile_program(
    text: str,
    filename: str = "<program>",
    aggregates: Mapping[str, AggregateFunction] | None = None,
    *,
    check_parsed: Callable[[ast.Program], None] | None = None,
    check_checked: Callable[[CheckedProgram], None] | None = None,
) -> CompiledProgram:
    """Parses, validates and lowers `text`; raises errors.ProgramError on a bad program.

    `aggregates` names the user-defined aggregate functions the program may use.
    `check_parsed` and `check_checked` see the program after parsing and after validation
    (the caller's limits: they raise to refuse it before the next pass runs)."""
    functions = dict(aggregates or {})
    parsed = parse(text, filename)
    if check_parsed is not None:
        check_parsed(parsed)
    checked = validate(parsed, text, filename, aggregates=tuple(functions))
    if check_checked is not None:
        check_checked(checked)
    return CompiledProgram(checked, drop_set_distincts(lower(checked), checked), functions)
