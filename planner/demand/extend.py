"""Pass: a program and a reader (view, key) -> the program extended with that reader's
demanded relations (magic.py's rewrite, validated and lowered), or why not.

The graph of a program builds a reader of a recursive view by key from the extension: the
demand source, the magic relations and the adorned copies join the program under fresh
names (so each reader's extension is its own and an earlier one's nodes are untouched),
and only the new relations' expressions are taken from the extended plan; the program's
own relations keep theirs, so the nodes built for them are shared with every other reader.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass

from pomoview.planner.demand.magic import Demanded, Full, demand_program
from pomoview.planner.frontend import ast
from pomoview.planner.frontend.dependencies import dependency_edges
from pomoview.planner.frontend.parse import parse
from pomoview.planner.frontend.relations import CheckedProgram
from pomoview.planner.frontend.validate import validate
from pomoview.planner.ir import ra
from pomoview.planner.ir.lower import lower


@dataclass(frozen=True)
class Extension:
    demanded: Demanded
    checked: CheckedProgram  # the program with the extension (the next one's base)
    exprs: dict[str, ra.Expr]  # the new relations' expressions only


def recursion_reached(checked: CheckedProgram, view: str) -> str | None:
    """A recursive relation `view` depends on (itself included), or None when none is."""
    recursive = {r for s in checked.strata if s.recursive for r in s.relations}
    reads: dict[str, list[str]] = {}
    for edge in dependency_edges(checked.relations):
        reads.setdefault(edge.head, []).append(edge.body)
    seen, stack = {view}, [view]
    while stack:
        name = stack.pop()
        if name in recursive:
            return name
        fresh = [r for r in reads.get(name, ()) if r not in seen]
        seen.update(fresh)
        stack += fresh
    return None


def extend(
    checked: CheckedProgram, view: str, key: tuple[str, ...], sliced: Collection[str] = ()
) -> Extension | Full:
    """`checked` extended for lookups of `view` by `key` (see the module docstring), the
    sources `sliced` read through slices (magic.py)."""
    rewritten = demand_program(checked, view, key, sliced)
    if isinstance(rewritten, Full):
        return rewritten
    extended = validate(
        parsed_extension(checked.text, rewritten.text),
        rewritten.text,
        "<demand>",
        aggregates=tuple(checked.user_aggregates),
    )
    plan = lower(extended)
    new = {name: expr for name, expr in plan.exprs.items() if name not in checked.relations}
    return Extension(rewritten, extended, new)


# The programs' parses by text, the latest last: an extension's base is the program with the
# earlier extensions, whose parse the last extension made.
_PARSES: OrderedDict[str, ast.Program] = OrderedDict()
_KEEP = 32
_PARSES_LOCK = threading.Lock()  # graphs of several servers or tests may extend at once


def parsed_extension(base: str, text: str) -> ast.Program:
    """`text` parsed, where it is `base` (whitespace at its end aside) and more: `base`'s
    parse, kept from an earlier call or made once, and the rest parsed alone, its lines
    numbered as in `text`. The whole program parsed again at every extension was most of
    a reader build's time (lark: 50 ms of 90 in the partial-state driver's programs)."""
    kept = base.rstrip()
    if not text.startswith(kept):
        return parse(text, "<demand>")
    with _PARSES_LOCK:
        program = _PARSES.get(kept)
    if program is None:
        program = parse(kept, "<demand>")
    rest = parse("\n" * kept.count("\n") + text[len(kept) :], "<demand>")
    whole = ast.Program(
        program.sources + rest.sources, program.views + rest.views, program.rules + rest.rules
    )
    with _PARSES_LOCK:
        _PARSES[kept] = program
        _PARSES.move_to_end(kept)
        _PARSES[text.rstrip()] = whole
        while len(_PARSES) > _KEEP:
            _PARSES.popitem(last=False)
    return whole
