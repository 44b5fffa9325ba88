"""The built-in sources in the language (planner/frontend/builtins.py): a program reads them
without declaring them, a program that does not read them does not see them, and declaring,
deriving into or writing to one is refused, naming it."""

from __future__ import annotations

import pytest

from pomoview.engine.engine import Engine
from pomoview.planner.compile import compile_program
from pomoview.planner.frontend.builtins import BUILTIN_SOURCES
from pomoview.planner.frontend.errors import ProgramError

BIG = """
source s(x: int).
view bigStates(view).
bigStates(view: V, rows: R) :- pomoview_state(view: V, rows: R), R > 100000.
"""


def test_a_program_reads_a_builtin_source_without_declaring_it() -> None:
    program = compile_program(BIG)
    relation = program.relations["pomoview_state"]
    assert relation.kind == "builtin"
    assert tuple((a, relation.types[a]) for a in relation.attributes) == BUILTIN_SOURCES["pomoview_state"]
    assert "pomoview_state" not in program.checked.sources  # the store and the log never see it
    assert program.relations["bigStates"].types == {"view": "string", "rows": "int"}
    # A program that does not read one does not see one.
    assert not set(BUILTIN_SOURCES) & set(compile_program("source s(x: int).").relations)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "source pomoview_epochs(applied: int).",
            "'pomoview_epochs' is a built-in source; it needs no declaration",
        ),
        ("pomoview_state(node: X) :- s(x: X).", "'pomoview_state' is a built-in source"),
        ("p(x: X) :- pomoview_epochs(applied: X, nope: Y).", "nope"),
    ],
)
def test_declaring_deriving_into_or_misreading_a_builtin_is_an_error(text: str, message: str) -> None:
    with pytest.raises(ProgramError, match=message):
        compile_program("source s(x: int).\n" + text)


def test_in_process_they_are_empty_and_read_only() -> None:
    engine = Engine(BIG)
    assert engine.read("bigStates") == set()
    with pytest.raises(ValueError, match="'pomoview_state' is a built-in source .* read-only"):
        engine.write(insert={"pomoview_state": [{"node": "n1"}]})
