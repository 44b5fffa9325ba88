"""Pass: PomoRA Plan -> PomoRA Plan without the Distinct of a relation already a set.

Lowering ends every derived relation in a Distinct (lower.py), a stateful operator that
holds each row of every present key and does per-row work at every step. When a rule's
body is a set by construction, that state and work buy nothing: for Noria's vote view
(`articleWithVotes(id, title, votes) :- article(...), votes := count : vote(...)`) the
DistinctIncremental was a fifth of the apply's time under a write load and a copy of every
warm row (the view's Reader holds them too).

A Distinct is dropped when its input is provably a set: every row's weight is 1 and never
more, after every step, since every operator below is exact and the expression's value is
a set at every epoch (an exact delta between two sets needs no Distinct). `is_set` proves
it bottom-up:

- a Scan of a source (source indexes turn operations into presence changes) or of a
  derived relation (itself a Distinct, or proved here), and Unit, are sets;
- Select, CidExtend (a function of the row), AntiJoin (a filter by absence) and
  Aggregate (each body row extended with one value) are sets when their input/body is;
- Join and SemiJoin of two sets are sets: a natural join keeps every column of both
  sides, so an output row has one pair of input rows; a semijoin's right side holds
  only left columns, so a left row matches at most one right row;
- a MultiJoin is a join of its atoms' inputs over every variable: a set when each is;
- Project is a set when its input is and it keeps every input column (renamed or not):
  then distinct input rows stay distinct.

Kept (the Distinct stays, and why):
- Union (two rules, or a rule and `p@next`): the same row may come from both;
- Difference: weights subtract (it appears inside fixpoints only);
- a Project that drops a column: two rows may become one (`p(x: X) :- e(x: X, y: Y)`);
- a Scan of a hidden `p@next` relation: fed by the time path, not by a source index;
- a recursive stratum (Recursive): its Distincts are the loop's DistinctTraces, and its
  relations are left as lowered;
- `p@ind` relations (the inductive bodies of `@next` rules): the time path reads them as
  whole sets at each epoch and is left as lowered;
- an ordered view (`order by`): its TopK refills a window from the ordered index of the
  state right below it (dataflow/operators/in_order.py), and the Distinct is that state
  when the body ends in a Map.
"""

from __future__ import annotations

from dataclasses import replace

from pomoview.planner.frontend.validate import CheckedProgram
from pomoview.planner.ir import ra
from pomoview.planner.ir.lower import Plan


def is_set(expr: ra.Expr, set_relations: frozenset[str]) -> bool:
    """Whether `expr`'s value is a set (every weight 1) whatever the data, given that the
    relations in `set_relations` are (see the module docstring)."""
    if isinstance(expr, ra.Scan):
        return expr.relation in set_relations
    if isinstance(expr, (ra.Unit, ra.Distinct)):
        return True
    if isinstance(expr, (ra.Select, ra.CidExtend)):
        return is_set(expr.input, set_relations)
    if isinstance(expr, ra.AntiJoin):
        return is_set(expr.left, set_relations)
    if isinstance(expr, ra.Aggregate):
        return is_set(expr.body, set_relations)
    if isinstance(expr, (ra.Join, ra.SemiJoin)):
        return is_set(expr.left, set_relations) and is_set(expr.right, set_relations)
    if isinstance(expr, ra.MultiJoin):
        return all(is_set(atom, set_relations) for atom, _ in expr.atoms)
    if isinstance(expr, ra.Project):
        kept = {op.name for _, op in expr.outputs if isinstance(op, ra.Col)}
        return kept >= set(expr.input.schema) and is_set(expr.input, set_relations)
    return False  # Union, Difference, Recur, Recursive


def drop_set_distincts(plan: Plan, program: CheckedProgram) -> Plan:
    """`plan` with the root Distinct of each non-recursive derived relation whose input is
    a set taken away (the module docstring says when it is kept)."""
    recursive = {name for stratum in program.strata if stratum.recursive for name in stratum.relations}
    set_relations = frozenset(n for n in program.relations if n not in plan.hidden)
    exprs = dict(plan.exprs)
    for name, expr in plan.exprs.items():
        if name in recursive or name not in program.relations or name in plan.inductive.values():
            continue
        if name in program.view_orders:
            continue
        if isinstance(expr, ra.Distinct) and is_set(expr.input, set_relations):
            exprs[name] = expr.input
    return replace(plan, exprs=exprs)
