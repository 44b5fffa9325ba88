"""A hypothesis stateful test of partial state over the web-app program of
test_partial_invariants.py (join chains, a star with a negation, a union, two aggregates):
hypothesis picks the writes, the lookups (views, RANDOM key attributes, values) and when a
held upquery is answered, and shrinks a failure to a short sequence of steps. The oracle is
the fully materialized graph; the invariants are checked after every step and at the end."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

sys.path.insert(0, str(Path(__file__).parent))
from partial_model import Model, Pending  # noqa: E402
from test_partial_invariants import WEB  # noqa: E402

from pomoview.planner.compile import compile_program  # noqa: E402

PROGRAM = compile_program(WEB)
VIEWS = sorted(n for n, r in PROGRAM.relations.items() if r.kind == "derived")
SOURCES = {s: len(PROGRAM.relations[s].attributes) for s in PROGRAM.checked.sources}
VALUES = st.integers(0, 4)


class PartialStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model(PROGRAM)
        self.pending: list[Pending] = []

    def _finish(self, p: Pending) -> bool:
        rows = self.model.attempt(p)
        if rows is None:
            return False
        assert [set(r) for r in rows] == self.model.reference(p.view, p.key, p.values)
        return True

    @rule(
        source=st.sampled_from(sorted(SOURCES)),
        ops=st.lists(st.tuples(st.tuples(VALUES, VALUES), st.sampled_from((1, 1, -1))), max_size=6),
    )
    def write(self, source: str, ops: list[tuple[tuple[int, int], int]]) -> None:
        self.model.write({source: dict(ops)})

    @rule(view=st.sampled_from(VIEWS), data=st.data())
    def lookup(self, view: str, data: st.DataObject) -> None:
        attrs = PROGRAM.relations[view].attributes
        chosen = data.draw(st.sets(st.sampled_from(attrs), min_size=1))
        key = tuple(a for a in attrs if a in chosen)
        values = data.draw(st.lists(st.tuples(*[VALUES for _ in key]), min_size=1, max_size=3))
        p = self.model.begin(view, key, values)
        if not self._finish(p):
            self.pending.append(p)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        p = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        if not self._finish(p):
            self.pending.append(p)

    @invariant()
    def graph_invariants(self) -> None:
        self.model.check_graph()

    def teardown(self) -> None:
        """Quiescence: every held upquery answered, then invariant 1 on every state."""
        for _ in range(100):
            if not self.pending:
                break
            p = self.pending.pop(0)
            if not self._finish(p):
                self.pending.append(p)
        assert not self.pending, "upqueries did not settle"
        self.model.check_states()


TestPartialStateMachine = PartialStateMachine.TestCase
TestPartialStateMachine.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
