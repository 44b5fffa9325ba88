"""Hypothesis stateful tests of partial state: one over the web-app program of
test_partial_invariants.py (join chains, a star with a negation, a union, two aggregates),
one over generated web-app programs (web_programs.py; hypothesis draws the program's seed).
Hypothesis picks the writes, the lookups (views, RANDOM key attributes, values), which of a
round's fetches finish and when a held upquery is answered, and shrinks a failure to a short
sequence of steps. The oracle is the fully materialized graph; the join invariant and prefix
presence are checked after every step, invariant 1 at the end (after every held upquery is
answered)."""

from __future__ import annotations

import random
import sys
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

sys.path.insert(0, str(Path(__file__).parent))
from partial_model import Model, Pending  # noqa: E402
from random_programs import INT_DOMAIN  # noqa: E402
from test_partial_invariants import WEB  # noqa: E402
from web_programs import generate_web  # noqa: E402

from pomoview.dataflow.node import FetchRequest  # noqa: E402
from pomoview.planner.compile import CompiledProgram, compile_program  # noqa: E402

VALUES = st.sampled_from(INT_DOMAIN)  # every attribute of these programs is an int


@cache
def web_program(seed: int) -> CompiledProgram:
    return compile_program(generate_web(random.Random(seed)).pomo())


class PartialStateMachine(RuleBasedStateMachine):
    """The rules; a subclass sets `self.model` (before any rule runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.model: Model | None = None
        self.pending: list[Pending] = []

    @property
    def m(self) -> Model:
        assert self.model is not None
        return self.model

    def _finish(self, p: Pending, data: st.DataObject) -> bool:
        before = set(p.requests)
        rows = self.m.attempt(p)
        if rows is None:
            new = sorted(p.requests - before, key=repr)
            if len(new) > 1:
                # Which of the round's fetches finish now; the others are held (still running).
                late = data.draw(st.sets(st.sampled_from(new), max_size=len(new) - 1), label="held back")
                p.requests -= late
                p.held |= late
            return False
        assert [set(r) for r in rows] == self.m.reference(p.view, p.key, p.values)
        return True

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        sources = sorted(self.m.store)
        source = data.draw(st.sampled_from(sources), label="source")
        width = len(self.m.attributes(source))
        row = st.tuples(*[VALUES for _ in range(width)])
        ops = data.draw(st.lists(st.tuples(row, st.sampled_from((1, 1, -1))), max_size=6), label="ops")
        self.m.write({source: dict(ops)})

    @rule(data=st.data())
    def lookup(self, data: st.DataObject) -> None:
        program = self.m.program
        views = sorted(n for n, r in program.relations.items() if r.kind == "derived")
        view = data.draw(st.sampled_from(views), label="view")
        attrs = program.relations[view].attributes
        chosen = data.draw(st.sets(st.sampled_from(attrs), min_size=1), label="key")
        key = tuple(a for a in attrs if a in chosen)
        keys = st.lists(st.tuples(*[VALUES for _ in key]), min_size=1, max_size=3)
        values = data.draw(keys, label="values")
        p = self.m.begin(view, key, values)
        if not self._finish(p, data):
            self.pending.append(p)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def overlapping_lookup(self, data: st.DataObject) -> None:
        """An upquery for keys overlapping those of one that is being filled."""
        first = data.draw(st.sampled_from(self.pending), label="overlapping")
        values = data.draw(st.lists(st.sampled_from(first.values), min_size=1), label="shared keys")
        other = data.draw(st.lists(st.tuples(*[VALUES for _ in first.key]), max_size=1), label="new keys")
        p = self.m.begin(first.view, first.key, values + other)
        if not self._finish(p, data):
            self.pending.append(p)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        p = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1), label="answer"))
        done: set[FetchRequest] = set()
        if p.held:
            done = data.draw(st.sets(st.sampled_from(sorted(p.held, key=repr))), label="finished")
        p.held -= done
        p.requests |= done
        if not self._finish(p, data):
            self.pending.append(p)

    @invariant()
    def graph_invariants(self) -> None:
        if self.model is not None:
            self.m.check_graph()

    def teardown(self) -> None:
        """Quiescence: every held upquery answered, then invariant 1 on every state."""
        if self.model is None:
            return
        for _ in range(100):
            if not self.pending:
                break
            p = self.pending.pop(0)
            p.requests |= p.held
            p.held.clear()
            rows = self.m.attempt(p)
            if rows is None:
                self.pending.append(p)
            else:
                assert [set(r) for r in rows] == self.m.reference(p.view, p.key, p.values)
        assert not self.pending, "upqueries did not settle"
        self.m.check_graph()
        self.m.check_states()


class FixedWebProgram(PartialStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model(compile_program(WEB))


class GeneratedWebPrograms(PartialStateMachine):
    @initialize(seed=st.integers(0, 10_000))
    def program(self, seed: int) -> None:
        program = web_program(seed)
        note(f"web_programs.generate_web(random.Random({seed})):\n{program.text}")
        self.model = Model(program)


SETTINGS = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestPartialStateMachine = FixedWebProgram.TestCase
TestPartialStateMachine.settings = SETTINGS
TestGeneratedWebPrograms = GeneratedWebPrograms.TestCase
TestGeneratedWebPrograms.settings = SETTINGS
