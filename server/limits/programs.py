"""Install's limits: the program's size, rules, rule width and dataflow depth.

Each is checked as early as it can be measured (the text before parsing, rules and rule
width before validation, the depth once the dependencies are known), so a program past a
limit is refused before the expensive passes run on it. The message points at the place,
as a program error does, and names the limit's flag.
"""

from __future__ import annotations

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import Diagnostic, Position, ProgramError
from pomoview.planner.frontend.size import plan_depth, rule_count, widest_rule
from pomoview.planner.frontend.validate import CheckedProgram
from pomoview.server.errors import ResourceExhausted
from pomoview.server.limits.requests import Limits


def _positioned(err: ResourceExhausted, position: Position, text: str, filename: str) -> ResourceExhausted:
    return ResourceExhausted(ProgramError([Diagnostic(position, err.message)], text, filename).render())


def check_text(limits: Limits, text: str) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    limits.check("max_program_bytes", "the program's size in bytes", size)


def check_parsed(limits: Limits, program: ast.Program, text: str, filename: str) -> None:
    limits.check("max_rules", "the number of rules", rule_count(program))
    widest = widest_rule(program)
    if widest is not None and widest.literals > limits.max_rule_atoms:
        what = f"the number of literals in this rule's body (for {widest.head!r})"
        err = limits.exceeded("max_rule_atoms", what, widest.literals)
        raise _positioned(err, widest.position, text, filename)


def check_checked(limits: Limits, program: CheckedProgram, filename: str) -> None:
    depth = plan_depth(program)
    if depth is not None and depth.depth > limits.max_plan_depth:
        shown = depth.chain if len(depth.chain) <= 6 else (*depth.chain[:3], "...", *depth.chain[-2:])
        chain = " <- ".join(shown)
        what = f"the estimated dataflow depth of {depth.relation!r} ({chain})"
        err = limits.exceeded("max_plan_depth", what, depth.depth)
        raise _positioned(err, program.relations[depth.relation].position, program.text, filename)
