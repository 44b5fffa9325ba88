"""The state a program carries across epochs (DESIGN §2, Time), and its durable checkpoint.

Two kinds of relation depend on history rather than on the sources at one epoch, so the
Parquet store cannot answer them:

- a *transient source* holds the inserts of the epoch that wrote them only; at the next
  epoch they are retracted (the batch's inserts are the new contents, deletes are no-ops);
- the hidden relation `p@next` of a relation p with `@next` rules holds, at epoch t, what
  p's inductive bodies (`p@ind`) held at the epoch before.

`TimeState` holds both in memory at one epoch (`epoch`), full, and the full circuits of
every `p@ind` (built from the store when needed: they are a cache of that state plus the
sources). The scheduler answers every fetch of these relations from it, never from Spark, so
a reader over them may still be partial: a state refilled at epoch t reads the same
relation the circuits stepped into.

Durability (the invariant, asserted by the scheduler in debug runs): the checkpoint file
holds the state at an epoch C with C >= the store's version V, and the write-ahead log
holds every batch after V (it is trimmed behind V only). So at a restart the state at C is
the checkpoint plus the sources at C (the store at V advanced with the logged batches in
(V, C]), and replaying the logged batches after C gives the state at the last committed
epoch. The flusher writes the checkpoint at epoch F, durably, before the store publishes
version F; an install writes one at its epoch. Transient tuples never enter the store:
their batches are logged like any other (so they stay durable until a checkpoint at or
after their epoch holds their effect), and the flusher leaves them out of its parts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pomoview.dataflow.circuit import Circuit
from pomoview.dataflow.node import Fetch, Filters, fetch_from
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import CompiledProgram
from pomoview.planner.ir.lower import next_name
from pomoview.server.disk.fsync import fsync_path
from pomoview.server.types import LoggedBatch

CHECKPOINT = "time_state.json"
FORMAT = 1

# A relation's identity across programs: its attributes with their types. State is carried
# from one program to the next (and from a checkpoint) only for an unchanged identity.
Signature = tuple[tuple[str, str], ...]


def program_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def uses_time(program: CompiledProgram | None) -> bool:
    """Whether `program` has `@next` rules or transient sources."""
    return program is not None and (
        bool(program.inductive) or any(r.transient for r in program.checked.sources.values())
    )


def _signature(program: CompiledProgram, relation: str) -> Signature:
    rel = program.relations[relation]
    return tuple((a, rel.types[a]) for a in rel.attributes)


# -- values in JSON: a tag per type, so that 1, 1.0 and true stay apart -------------------


def _encode(value: object) -> list[object]:
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["i", value]
    if isinstance(value, float):
        return ["f", value]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, bytes):
        return ["y", base64.b64encode(value).decode()]
    raise TypeError(f"cannot checkpoint a value of type {type(value).__name__}: {value!r}")


def _decode(raw: list[object]) -> object:
    tag, value = raw
    if tag == "y":
        assert isinstance(value, str)
        return base64.b64decode(value)
    if tag == "f":
        return float(value)  # type: ignore[arg-type]
    return value


def _encode_rows(rows: Iterable[Row]) -> list[list[list[object]]]:
    return sorted(([_encode(v) for v in row] for row in rows), key=json.dumps)


def _decode_rows(raw: Iterable[list[list[object]]]) -> set[Row]:
    return {tuple(_decode(v) for v in row) for row in raw}


@dataclass
class Checkpoint:
    """The durable form of a `TimeState` at `epoch`, and the registry of every source any
    installed program declared transient (the flusher keeps them out of the store, even
    after a program that no longer declares them)."""

    epoch: int
    program: str  # the digest of the program the state belongs to
    next: dict[str, tuple[Signature, set[Row]]] = field(default_factory=dict)  # p -> p@next
    transient: dict[str, tuple[Signature, set[Row]]] = field(default_factory=dict)
    transient_sources: frozenset[str] = frozenset()

    def write(self, directory: Path) -> None:
        """Replaces the checkpoint in `directory` atomically and durably."""
        doc = {
            "format": FORMAT,
            "epoch": self.epoch,
            "program": self.program,
            "transient_sources": sorted(self.transient_sources),
            "next": {
                p: {"signature": [list(a) for a in sig], "rows": _encode_rows(rows)}
                for p, (sig, rows) in sorted(self.next.items())
            },
            "transient": {
                s: {"signature": [list(a) for a in sig], "rows": _encode_rows(rows)}
                for s, (sig, rows) in sorted(self.transient.items())
            },
        }
        path = directory / CHECKPOINT
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
        fsync_path(directory)

    @staticmethod
    def read(directory: Path) -> Checkpoint | None:
        path = directory / CHECKPOINT
        if not path.exists():
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown checkpoint format {doc.get('format')!r}")

        def relations(part: Mapping[str, dict[str, list[object]]]) -> dict[str, tuple[Signature, set[Row]]]:
            out: dict[str, tuple[Signature, set[Row]]] = {}
            for name, entry in part.items():
                pairs: list[list[str]] = entry["signature"]  # type: ignore[assignment]
                out[name] = (
                    tuple((str(pair[0]), str(pair[1])) for pair in pairs),
                    _decode_rows(entry["rows"]),  # type: ignore[arg-type]
                )
            return out

        return Checkpoint(
            epoch=int(doc["epoch"]),
            program=str(doc["program"]),
            next=relations(doc["next"]),
            transient=relations(doc["transient"]),
            transient_sources=frozenset(doc["transient_sources"]),
        )


class TimeState:
    """A program's transient sources and `p@next` relations at `epoch`, and the full
    circuits of its `p@ind` relations (None until built; see the module docstring).

    Not thread-safe: the scheduler calls it under its dataflow lock.
    """

    def __init__(
        self,
        program: CompiledProgram,
        epoch: int,
        carried: Checkpoint | None = None,
        *,
        binary_joins: bool = False,
    ) -> None:
        """The state at `epoch`: what `carried` holds for relations whose signature is
        unchanged in `program`, empty for the others. `binary_joins`: the `p@ind` circuits
        plan cyclic bodies as binary joins too (`serve --binary-joins`)."""
        self.program = program
        self.binary_joins = binary_joins
        self.digest = program_digest(program.text)
        self.epoch = epoch
        self.transient: dict[str, set[Row]] = {
            name: _carry(carried.transient if carried else None, name, _signature(program, name))
            for name, relation in program.checked.sources.items()
            if relation.transient
        }
        self.next: dict[str, set[Row]] = {
            p: _carry(carried.next if carried else None, p, _signature(program, p)) for p in program.inductive
        }
        self.circuits: dict[str, Circuit] | None = None
        self.held: dict[str, set[Row]] = {}  # p -> p@ind at `epoch` (p@next at the next one)

    # -- reads ----------------------------------------------------------------------

    def serves(self, relation: str) -> bool:
        """Whether `relation` is read from this state (a transient source or a `p@next`)."""
        return relation in self.transient or relation in self.program.hidden_sources

    def contents(self, relation: str) -> set[Row]:
        if relation in self.transient:
            return self.transient[relation]
        return self.next[relation.removesuffix("@next")]

    def fetch(self, source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
        """A `Fetch` over this state at `epoch` (as the engine's over its in-memory sets)."""
        attributes = self.program.hidden_sources.get(source)
        if attributes is None:
            attributes = tuple(self.program.relations[source].attributes)
        return fetch_from(self.contents(source), attributes, names, keys, filters)

    # -- the p@ind circuits -----------------------------------------------------------

    def build(self, fetch: Fetch) -> None:
        """Builds the `p@ind` circuits at `epoch`; `fetch` answers the persistent sources
        at `epoch` (this state answers the others)."""

        def both(
            source: str, names: tuple[str, ...], keys: list[Key], filters: Filters
        ) -> Iterable[Row] | None:
            if self.serves(source):
                return self.fetch(source, names, keys, filters)
            return fetch(source, names, keys, filters)

        circuits = {
            p: self.program.build_reader(ind, (), both, partial=False, binary_joins=self.binary_joins)
            for p, ind in self.program.inductive.items()
        }
        self.held = {p: set(c.lookup([()])[0]) for p, c in circuits.items()}
        self.circuits = circuits

    def advance(
        self, batch: LoggedBatch, operations: Callable[[LoggedBatch], dict[str, ZSet[Row]]]
    ) -> dict[str, ZSet[Row]]:
        """Steps the state to `batch`'s epoch; returns the epoch's changes for every circuit
        reading this program: `operations(batch)` for the persistent sources, the exact
        deltas of the transient sources and `p@next` relations. The circuits must be built.
        If a circuit raises, the state stays at the epoch before and the circuits are
        dropped (the caller rebuilds them)."""
        assert self.circuits is not None, "build the p@ind circuits before advancing"
        assert batch.epoch > self.epoch, (batch.epoch, self.epoch)
        changes = {s: z for s, z in operations(batch).items() if s not in self.transient}
        transient: dict[str, set[Row]] = {}
        for source, present in self.transient.items():
            change = batch.changes.get(source)
            # An event lives for the epoch that wrote it; deleting one is a no-op.
            now: set[Row] = set(change.inserts) if change is not None else set()
            transient[source] = now
            _delta(source, present, now, changes)
        following = {p: self.held[p] for p in self.next}
        for p, held in following.items():
            _delta(next_name(p), self.next[p], held, changes)
        try:
            for circuit in self.circuits.values():
                circuit.step(changes)
            held_now = {p: set(c.lookup([()])[0]) for p, c in self.circuits.items()}
        except Exception:
            self.circuits = None
            raise
        self.transient, self.next, self.held = transient, following, held_now
        self.epoch = batch.epoch
        return changes

    def checkpoint(self, transient_sources: frozenset[str]) -> Checkpoint:
        """A copy of the state, to write outside the lock."""
        program = self.program
        return Checkpoint(
            epoch=self.epoch,
            program=self.digest,
            next={p: (_signature(program, p), set(rows)) for p, rows in self.next.items()},
            transient={s: (_signature(program, s), set(rows)) for s, rows in self.transient.items()},
            transient_sources=transient_sources,
        )


def _carry(
    held: Mapping[str, tuple[Signature, set[Row]]] | None, name: str, signature: Signature
) -> set[Row]:
    if not held or name not in held:
        return set()
    old_signature, rows = held[name]
    return set(rows) if old_signature == signature else set()


def _delta(name: str, before: set[Row], after: set[Row], changes: dict[str, ZSet[Row]]) -> None:
    added, removed = after - before, before - after
    if added or removed:
        changes[name] = ZSet([(row, 1) for row in added] + [(row, -1) for row in removed])
