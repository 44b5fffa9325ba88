"""The scheduler's part for time (DESIGN §2): transient sources and `@next` rules.

`TimeState` (time_state.py) holds the program's history-dependent relations at one epoch,
with the full circuits of its `p@ind` relations. `TimePath` keeps it at the applied epoch
(`_ready`), steps it with every applied batch (`epoch_operations`), answers the dataflow's
fetches of those relations from it (`fetch`), and checkpoints it.

The invariant (see time_state.py), asserted here: the state's epoch and the checkpoint's
are never behind the store's version, so the log tail always holds the batches that bring
either to the applied epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from pomoview.dataflow.node import Fetch, Filters
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram
from pomoview.planner.frontend.errors import Diagnostic, ProgramError
from pomoview.server.errors import FailedPrecondition, Unavailable
from pomoview.server.store.source_store import SourceStore
from pomoview.server.temporal.time_state import Checkpoint, TimeState, program_digest, uses_time
from pomoview.server.types import LoggedBatch
from pomoview.server.views.view_state import ViewState

log = logging.getLogger("pomoview.scheduler")


def operations(batch: LoggedBatch) -> dict[str, ZSet[Row]]:
    """A batch's operations per source: +1 per insert, -1 per delete (source indexes make
    them exact deltas)."""
    ops: dict[str, ZSet[Row]] = {}
    for source, change in batch.changes.items():
        # write() made the inserts and deletes distinct and disjoint: one dict of weights.
        weights: dict[Row, int] = dict.fromkeys(change.inserts, 1)
        weights.update(dict.fromkeys(change.deletes, -1))
        ops[source] = ZSet.of_weights(weights)
    return ops


class TimePath:
    """The program's state across epochs, kept at the view state's applied epoch; the
    checkpoint lives in `data_dir`. Every method but `storable` and `check_transient` is
    called with the dataflow lock held (`recover` before any other thread runs)."""

    def __init__(self, view: ViewState, store: SourceStore, data_dir: Path) -> None:
        self._view = view
        self._store = store
        self._data_dir = data_dir
        # The program's state across epochs (None when it has neither @next rules nor
        # transient sources). Guarded by the dataflow lock.
        self.state: TimeState | None = None
        # Every source any installed program declared transient: kept out of the store forever.
        self.transient_sources: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        """Whether the program keeps state across epochs (time advances at every write)."""
        return self.state is not None

    # -- start-up and install -----------------------------------------------------------

    def recover(self) -> None:
        """The state of the recovered program at the checkpoint's epoch (its circuits and
        the batches after it come at the first use, `_ready`)."""
        program = self._view.program
        checkpoint = Checkpoint.read(self._data_dir)
        own = {n for n, r in program.checked.sources.items() if r.transient} if program else set()
        self.transient_sources = frozenset(own | (checkpoint.transient_sources if checkpoint else set()))
        self.state = None
        if not uses_time(program):
            return
        assert program is not None
        version = self._store.version
        binary = self._view.binary_joins  # the p@ind circuits' plans, as the views'
        if checkpoint is not None and checkpoint.program == program_digest(program.text):
            # The invariant: the checkpoint is never behind the store.
            assert checkpoint.epoch >= version, (checkpoint.epoch, version)
            self.state = TimeState(program, checkpoint.epoch, checkpoint, binary_joins=binary)
        elif checkpoint is not None and checkpoint.epoch >= version:
            # An install that stopped between saving the program and its checkpoint (it was
            # never acknowledged): carry what the earlier program held, as the install does.
            self.state = TimeState(program, checkpoint.epoch, checkpoint, binary_joins=binary)
        else:
            self.state = TimeState(program, version, binary_joins=binary)
        log.info("time state of %d relations recovered at epoch %d", len(program.inductive), self.state.epoch)

    def check_transient(self, program: CompiledProgram, filename: str) -> frozenset[str]:
        """Refuses a source whose transience differs from what earlier programs declared
        (a transient source's tuples were never stored; a persistent one's are); returns
        the registry with `program`'s transient sources."""
        stored = self._store.schemas()
        diagnostics = []
        for name, relation in program.checked.sources.items():
            if relation.transient and name in stored and name not in self.transient_sources:
                why = (
                    f"source {name!r} was declared persistent by an earlier program (its tuples are "
                    "stored); it cannot become transient"
                )
                diagnostics.append(Diagnostic(relation.position, why))
            elif not relation.transient and name in self.transient_sources:
                why = (
                    f"source {name!r} was declared transient by an earlier program (its tuples were "
                    "never stored); it cannot become persistent"
                )
                diagnostics.append(Diagnostic(relation.position, why))
        if diagnostics:
            raise FailedPrecondition(str(ProgramError(diagnostics, program.text, filename)))
        return self.transient_sources | {n for n, r in program.checked.sources.items() if r.transient}

    def carry(self, registry: frozenset[str]) -> Checkpoint | None:
        """The current state at the applied epoch, for the next program to carry (caller
        holds the dataflow lock). Raises Unavailable if it cannot be brought there."""
        if self.state is None:
            return None
        self._ready()
        return self.state.checkpoint(registry)

    def install(
        self, program: CompiledProgram, registry: frozenset[str], carried: Checkpoint | None
    ) -> Checkpoint:
        """Starts the new program's state at the applied epoch, with what `carried` holds
        for relations whose attributes and types are unchanged; returns its checkpoint,
        which the caller writes (caller holds the dataflow lock, and the flusher's)."""
        applied = self._view.applied_epoch
        self.transient_sources = registry
        binary = self._view.binary_joins
        self.state = TimeState(program, applied, carried, binary_joins=binary) if uses_time(program) else None
        if self.state is None:
            return Checkpoint(applied, program_digest(program.text), transient_sources=registry)
        return self.state.checkpoint(registry)

    # -- the state at the applied epoch -------------------------------------------------

    def _ready(self, through: int | None = None) -> None:
        """Brings the state to `through` (the applied epoch): builds its circuits from the
        store and the log tail if they are gone, then steps them with the logged batches
        after the state's epoch. Caller holds the dataflow lock; Spark jobs may run."""
        state = self.state
        if state is None:
            return
        view = self._view
        through = view.applied_epoch if through is None else through
        # The invariant: the tail holds every batch after the state's epoch.
        assert state.epoch >= view.tail.base, (state.epoch, view.tail.base)
        try:
            if state.circuits is None:
                state.build(self._sources_at(state.epoch))
            for batch in view.tail.batches:
                if state.epoch < batch.epoch <= through:
                    state.advance(batch, operations)
        except (FailedPrecondition, Unavailable):
            raise
        except Exception as err:
            log.exception("the @next state could not be brought to epoch %d", through)
            raise Unavailable(f"the @next state could not be brought to epoch {through}: {err}") from err

    def _sources_at(self, epoch: int) -> Fetch:
        """A Fetch of the persistent sources at `epoch`: a Spark job over the store (at its
        version, which is not after `epoch`), advanced with the logged batches."""
        view, store = self._view, self._store

        def fetch(source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters) -> Iterable[Row]:
            schema = [a for a, _ in view.require_program().source_schema(source)]
            with store.pinned() as pin:
                version, tuples = store.fetch(source, cols, list(keys), dict(filters), at=pin)  # type: ignore[arg-type]
            assert view.tail.base <= version <= epoch, (view.tail.base, version, epoch)
            positions = [schema.index(c) for c in cols]
            tests = tuple((schema.index(a), v) for a, v in filters)
            return view.tail.overlay(source, tuples, version, epoch, positions, keys, tests)

        return fetch

    def fetch(
        self, source: str, cols: tuple[str, ...], keys: list[Key], filters: Filters
    ) -> list[Row] | None:
        """The dataflow's fetch of a transient source or a `p@next` relation at the applied
        epoch, or None for any other relation (caller holds the dataflow lock)."""
        state = self.state
        if state is None or not state.serves(source):
            return None
        self._ready()
        return state.fetch(source, cols, keys, filters)

    def epoch_operations(self, batch: LoggedBatch) -> dict[str, ZSet[Row]] | None:
        """The changes `batch` makes to every relation a circuit reads, with the state
        stepped to its epoch; None when the graph must be rebuilt instead (the state was
        behind and caught up, or could not step). Caller holds the dataflow lock."""
        state = self.state
        if state is None:
            return operations(batch)
        try:
            if state.circuits is not None and state.epoch == self._view.applied_epoch:
                return state.advance(batch, operations)
            self._ready(batch.epoch)
        except Exception:
            log.exception("the @next state failed at epoch %d; it is rebuilt at the next use", batch.epoch)
        return None

    # -- durability --------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint | None:
        """The state at the applied epoch, to write before the store publishes that epoch
        (caller holds the dataflow lock); None when the program keeps no state."""
        if self.state is None:
            return None
        self._ready()
        return self.state.checkpoint(self.transient_sources)

    def storable(self, batches: list[LoggedBatch]) -> list[LoggedBatch]:
        """The batches without their transient sources' changes: events never enter the store."""
        drop = self.transient_sources
        return [
            LoggedBatch(b.epoch, {s: c for s, c in b.changes.items() if s not in drop})
            if drop.intersection(b.changes)
            else b
            for b in batches
        ]
