"""The in-process engine: install a program, apply write batches, read any relation.

No server, no Spark: the base relations are in-memory sets, and readers are
PomoFlow circuits built lazily (3DF's lazy synthesis) at the first `read`
(the reader keyed by (), full) or `lookup` (keyed by the key's attributes,
partial where key provenance allows), then stepped at every write. Their
sources fetch from the in-memory sets.

Time (DESIGN §2): installing is epoch 0; every `write` is one epoch, even an
empty one (time still advances for `@next`).

- A transient source holds the tuples of the epoch that wrote them only: at the
  next epoch the engine retracts them (the batch's inserts are the new contents).
- `@next` (pomo_logic §2.1): for each relation p with inductive rules the
  planner adds a hidden relation `p@next`, read by p like a source, and the
  relation `p@ind` of p's inductive bodies. The engine keeps a full reader of
  `p@ind`, built at install and stepped at every epoch; at epoch t+1 it makes
  `p@next` hold what `p@ind` held at epoch t. So p(t) = p's deductive rules at
  t ∪ its inductive bodies at t-1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Filters, fetch_from, project
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import AggregateFunction, CompiledProgram, ProgramGraph, compile_program
from pomoview.planner.frontend.builtins import read_only
from pomoview.planner.frontend.validate import Relation
from pomoview.planner.frontend.values import coerce
from pomoview.planner.ir.lower import next_name

_EMPTY: Mapping[str, Iterable[Mapping[str, object]]] = {}


def _coerce(value: object, type_: str, where: str) -> object:
    """`value` as a value of `type_`, or ValueError naming `where` (values.coerce).

    A CID's text is not checked: the engine answers which tuple a CID names, and its tests
    write any text where a cid is declared (tests/planner/test_engine_oracle.py)."""
    return coerce(value, type_, where, check_cid=False)


class Engine:
    """One program, its base relations in memory, and its readers (see the module docstring)."""

    def __init__(
        self,
        text: str,
        *,
        filename: str = "<program>",
        aggregates: Mapping[str, AggregateFunction] | None = None,
        partial: bool = True,
        whole_source_rows: int | None = None,
        binary_joins: bool = False,
    ) -> None:
        """`partial=False` keeps every state full: the fully materialized reference run.
        `whole_source_rows`: a recursive view's demanded rules read a source of at most that
        many rows whole, a larger one through slices fetched by demand (None: every source
        whole), as the server's `--whole-source-rows` does. `binary_joins` plans cyclic rule
        bodies as binary joins too, not as a WcojJoin (planner/ir/cyclic.py): the two plans'
        comparison, as `serve --binary-joins`."""
        self.program: CompiledProgram = compile_program(text, filename, aggregates)
        self.partial = partial
        self.whole_source_rows = whole_source_rows
        self.binary_joins = binary_joins
        self.graph = self._new_graph()
        self.epoch = 0
        self.store: dict[str, set[Row]] = {name: set() for name in self.program.checked.sources}
        for hidden in self.program.hidden_sources:
            self.store[hidden] = set()
        # The server's own state (builtins.py): there is none in process, so they stay empty.
        for name, relation in self.program.relations.items():
            if relation.kind == "builtin":
                self.store[name] = set()
        # p -> the full reader of p@ind, and what it held at the last epoch.
        self._inductive: dict[str, Circuit] = {}
        self._next: dict[str, set[Row]] = {}
        self._build_inductive()

    def _new_graph(self) -> ProgramGraph:
        limit = self.whole_source_rows
        hold_whole = None if limit is None else (lambda source: len(self.store[source]) <= limit)
        return ProgramGraph(
            self.program, partial=self.partial, hold_whole=hold_whole, binary_joins=self.binary_joins
        )

    def _build_inductive(self) -> None:
        """Builds the missing `p@ind` readers from the current store (at install, or again
        after a failed epoch) and records what they hold now."""
        for relation, ind in self.program.inductive.items():
            if relation not in self._inductive:
                circuit = self.program.build_reader(ind, (), self._fetch, binary_joins=self.binary_joins)
                self._inductive[relation] = circuit
                self._next[relation] = set(circuit.lookup([()])[0])

    # -- schema -------------------------------------------------------------------

    def attributes(self, relation: str) -> tuple[str, ...]:
        return tuple(self._relation(relation).attributes)

    def _relation(self, name: str) -> Relation:
        relation = self.program.relations.get(name)
        if relation is None:
            known = ", ".join(sorted(self.program.relations)) or "none"
            raise ValueError(f"no relation named {name!r} (relations: {known})")
        return relation

    # -- writes -------------------------------------------------------------------

    def _rows(
        self, batch: Mapping[str, Iterable[Mapping[str, object]]], what: str
    ) -> dict[str, set[Row]]:
        out: dict[str, set[Row]] = {}
        for source, tuples in batch.items():
            relation = self.program.relations.get(source)
            if relation is None:
                known = ", ".join(sorted(self.program.checked.sources)) or "none"
                raise ValueError(f"{what}: no source named {source!r} (sources: {known})")
            if relation.kind == "builtin":
                raise ValueError(f"{what}: {read_only(source)}")
            if relation.kind != "source":
                raise ValueError(f"{what}: {source!r} is derived; only sources can be written")
            rows = out.setdefault(source, set())
            for i, item in enumerate(tuples):
                where = f"{what} {source}[{i}]"
                if not isinstance(item, Mapping):
                    raise ValueError(f"{where}: a tuple is a mapping attribute -> value")
                unknown = sorted(set(item) - set(relation.attributes))
                if unknown:
                    raise ValueError(
                        f"{where}: {source!r} has no attribute {', '.join(map(repr, unknown))} "
                        f"(it has {', '.join(relation.attributes)})"
                    )
                missing = [a for a in relation.attributes if a not in item]
                if missing:
                    raise ValueError(f"{where}: missing attribute {', '.join(map(repr, missing))}")
                rows.add(
                    tuple(
                        _coerce(item[a], relation.types[a], f"{where}.{a}")
                        for a in relation.attributes
                    )
                )
        return out

    def write(
        self,
        insert: Mapping[str, Iterable[Mapping[str, object]]] = _EMPTY,
        delete: Mapping[str, Iterable[Mapping[str, object]]] = _EMPTY,
    ) -> int:
        """Applies one batch as the next epoch and returns it; refuses a bad batch whole.

        Inserting a present tuple and deleting an absent one are no-ops. Refused
        (ValueError, nothing changed): an unknown source or attribute, a missing
        attribute, a value of the wrong type, a derived relation, a tuple both
        inserted and deleted.

        A batch whose evaluation fails (a recursion that reaches no fixed point within
        the child's iteration bound) is applied to the base relations all the same, and
        the error is raised; every reader is dropped (rebuilt from the base relations at
        the next read) so that no half-stepped state is ever read."""
        self._build_inductive()
        inserts = self._rows(insert, "insert")
        deletes = self._rows(delete, "delete")
        for source in inserts.keys() & deletes.keys():
            both = inserts[source] & deletes[source]
            if both:
                raise ValueError(
                    f"{source}: {sorted(both, key=repr)[0]!r} is both inserted and deleted in one batch"
                )
        changes: dict[str, ZSet[Row]] = {}
        for source, relation in self.program.checked.sources.items():
            present = self.store[source]
            added = inserts.get(source, set())
            if relation.transient:
                # An event lives for the epoch that wrote it: the batch's inserts replace it
                # (so deleting one is a no-op: it is gone by the next epoch anyway).
                self._change(source, added - present, present - added, changes)
            else:
                self._change(source, added - present, deletes.get(source, set()) & present, changes)
        for name, held in self._next.items():
            present = self.store[next_name(name)]
            self._change(next_name(name), held - present, present - held, changes)
        self.epoch += 1
        try:
            for circuit in self._inductive.values():
                circuit.step(changes)
            self.graph.step(changes)
        except Exception:
            self.graph = self._new_graph()
            self._inductive.clear()
            raise
        for name, circuit in self._inductive.items():
            self._next[name] = set(circuit.lookup([()])[0])
        return self.epoch

    def _change(
        self, name: str, added: set[Row], removed: set[Row], changes: dict[str, ZSet[Row]]
    ) -> None:
        """Applies an exact change (`added` absent, `removed` present) to the stored set
        `name` and records it as the epoch's delta of `name`."""
        if not added and not removed:
            return
        stored = self.store[name]
        stored |= added
        stored -= removed
        changes[name] = ZSet([(row, 1) for row in added] + [(row, -1) for row in removed])

    # -- reads --------------------------------------------------------------------

    def _fetch(
        self, source: str, names: tuple[str, ...], keys: list[Key], filters: Filters
    ) -> Iterable[Row]:
        attributes = self.program.hidden_sources.get(source)
        if attributes is None:
            attributes = tuple(self.program.relations[source].attributes)
        return fetch_from(self.store[source], attributes, names, keys, filters)

    @property
    def readers(self) -> dict[tuple[str, tuple[str, ...]], Circuit]:
        """Each reader built so far -> the circuit of the graph they all share."""
        circuit = self.graph.graph.circuit
        return {name: circuit for name in self.graph.graph.readers}

    def _lookup(self, relation: str, key: tuple[str, ...], values: Key) -> list[Row]:
        return self.graph.lookup(relation, key, [values], self._fetch)[0]

    def read(self, relation: str) -> set[tuple[object, ...]]:
        """The whole relation (a source or a derived one), tuples in `attributes` order."""
        if self._relation(relation).kind == "source":
            return set(self.store[relation])
        return set(self._lookup(relation, (), ()))

    def lookup(self, relation: str, key: Mapping[str, object]) -> set[tuple[object, ...]]:
        """The relation's tuples whose attributes equal `key`'s, through a partial reader."""
        rel = self._relation(relation)
        unknown = sorted(set(key) - set(rel.attributes))
        if unknown:
            raise ValueError(
                f"{relation!r} has no attribute {', '.join(map(repr, unknown))} "
                f"(it has {', '.join(rel.attributes)})"
            )
        attrs = tuple(a for a in rel.attributes if a in key)
        values = tuple(_coerce(key[a], rel.types[a], f"key {a}") for a in attrs)
        if rel.kind == "source":
            cols = tuple(rel.attributes.index(a) for a in attrs)
            return {row for row in self.store[relation] if project(row, cols) == values}
        return set(self._lookup(relation, attrs, values))
