"""Pass 4 of 6: key provenance (partial eligibility), PomoRA -> a KeyedPlan.

Given the expression of a reader's relation and the key attributes it is looked up by,
this pass decides, for every operator on the way to the sources, by which columns the
operator below will upquery it: its *key*. A key traces through an operator when its
columns are copies of input columns (Noria's key provenance); where it does not, the
operator and everything above it is *full* (key None), hydrated once with a scan:

- Select, Distinct, Union, Difference pass the key unchanged to every input; a Select of
  `attribute == constant` on a source is pushed into the source index (`pushed`).
- Project translates the key to the input columns it copies; a constant column drops
  out (a key of only constants is none: full).
- A content-id extension passes the key unless it includes the content id.
- Join and SemiJoin: when the key is the join columns (as a set) both inputs are keyed by
  it; otherwise when every key column is a column of one input (the left preferred),
  that input is the *keyed side* and gets the key, and the other input gets the join
  columns (a dependent upquery: its state is indexed by the join columns); a key with
  columns of both inputs and not all join columns has no provenance (full).
- AntiJoin: the output is the left's columns, so the left is the keyed side; the right
  gets the antijoin columns.
- Aggregate: a key of body columns (not the aggregate's result) keys the body; the atom
  gets the group columns, or is full when there are none (one global group). A key with
  the result column is derived from an aggregate value: full.
- A recursive stratum (Recursive) is full whatever the key, and so is a Unit.
- A MultiJoin (cyclic.py's n-way join of a cyclic body) is full whatever the key, like a
  recursive stratum, and so are its inputs. Why: it is built as a WcojJoin, whose state is
  per-attribute indexes of its inputs, each asked by a prefix of the bindings some update
  path has made, so a key of the output does not say which rows of the inputs it needs: a
  key on some atom's variables leaves the other atoms read by any value of theirs. (Partial
  indexes, filled per prefix as the paths ask, are not built.) It answers an upquery by any
  of its columns from its full indexes (a lookup path extends the key's bindings), so the
  partial states and the reader above it are filled from it as from a full join. A keyed
  reader of a view reading a MultiJoin is built from the demand transformation instead
  (planner/demand/readers.py), whose guard keeps the join to the demanded keys.
- Hidden `p@next` relations and sources are leaves: their source index is keyed by the key.
  History (`@next`, transient sources) does not make a state full here: what depends on the
  epochs before is held at the leaves, full and at the current epoch, by whoever runs the
  program (the engine's sets, the server's TimeState, which checkpoints them durably), and
  their upqueries are answered from it, never from the store; a partial state above them is
  refilled from the same epoch's contents its deltas came from. What must be full is the
  relation `p@ind` of p's inductive bodies, read every epoch for every key to make the next
  `p@next`: it is always built keyed by () (full), at install, not at a lookup.

So a partial state only ever has partial states or the reader below it, never a full one
(a full operator's inputs are all full): Noria's eligibility rule. The pass is iterative
(no recursion per operator) and memoized by (expression, key), so the result is a DAG in
which a shared sub-expression asked by the same key appears once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pomoview.planner.ir import ra

Key = tuple[str, ...] | None  # column names the node below upqueries by; None = full


@dataclass(eq=False)
class Keyed:
    """One operator of the plan and the key it is upqueried by.

    `expr` is the operator (a Scan of a derived relation is resolved to its expression);
    `inputs` are its inputs' Keyed nodes; `side` is, for a two-input operator with a key,
    the input the key traces to (0 left/body, 1 right); `pushed` are the constant
    selections pushed into a source index (`expr` is then that Select, and `inputs` the
    Keyed of the scan it reads)."""

    expr: ra.Expr
    key: Key
    side: int | None = None
    inputs: list[Keyed] = field(default_factory=list)
    pushed: dict[ra.Compare, tuple[str, Any]] = field(default_factory=dict)
    planned: bool = False

    @property
    def partial(self) -> bool:
        return self.key is not None


def pushable(expr: ra.Select, is_source: Callable[[ra.Expr], bool]) -> dict[ra.Compare, tuple[str, Any]]:
    """The predicates of `expr` of the form `attribute == constant` on a source's own
    attribute, each with its (attribute, constant) filter, when `expr` selects from a
    source Scan (or its content id extension)."""
    scan = expr.input.input if isinstance(expr.input, ra.CidExtend) else expr.input
    if not (isinstance(scan, ra.Scan) and is_source(scan)):
        return {}
    pushed: dict[ra.Compare, tuple[str, Any]] = {}
    for p in expr.predicates:
        left, right = p.left, p.right
        if isinstance(left, ra.Const) and isinstance(right, ra.Col):
            left, right = right, left
        if (
            p.op == "=="
            and isinstance(left, ra.Col)
            and isinstance(right, ra.Const)
            and left.name in scan.schema
            and all(a != left.name for a, _ in pushed.values())  # one constant per attribute
            # NaN equals nothing in Python but itself in Spark: leave it to a Filter.
            and not (isinstance(right.value, float) and math.isnan(right.value))
        ):
            pushed[p] = (left.name, right.value)
    return pushed


def _two_sided(key: Key, on: tuple[str, ...], left: tuple[str, ...], right: tuple[str, ...]) -> tuple[
    int | None, Key, Key
]:
    """(keyed side, left key, right key) of a join on `on` asked by `key`."""
    if key is None:
        return None, None, None
    if on and set(key) == set(on):
        return 0, key, key
    other_key = on or None  # a product: the other side is one group, kept full
    if set(key) <= set(left):
        return 0, key, other_key
    if set(key) <= set(right):
        return 1, other_key, key
    return None, None, None


def _plan_inputs(
    expr: ra.Expr, key: Key, is_source: Callable[[ra.Expr], bool]
) -> tuple[ra.Expr, int | None, list[tuple[ra.Expr, Key]], dict[ra.Compare, tuple[str, Any]]]:
    """The rule for one operator: the operator, its keyed side, its inputs with their keys,
    the pushed selections."""
    if key == ():
        key = None
    if isinstance(expr, (ra.Scan, ra.Recursive, ra.Unit)):  # a Scan here is of a source
        return expr, None, [], {}
    if isinstance(expr, ra.CidExtend):
        return expr, None, [(expr.input, key if key is None or ra.CID_COLUMN not in key else None)], {}
    if isinstance(expr, ra.Select):
        pushed = pushable(expr, is_source)
        if pushed:
            scan = expr.input.input if isinstance(expr.input, ra.CidExtend) else expr.input
            inner = key if key is None or ra.CID_COLUMN not in key else None
            return expr, None, [(scan, inner)], pushed
        return expr, None, [(expr.input, key)], {}
    if isinstance(expr, ra.Project):
        if key is None:
            return expr, None, [(expr.input, None)], {}
        outputs = dict(expr.outputs)
        parent_key: list[str] = []
        for name in key:
            operand = outputs[name]
            if isinstance(operand, ra.Col) and operand.name not in parent_key:
                parent_key.append(operand.name)
        return expr, None, [(expr.input, tuple(parent_key) or None)], {}
    if isinstance(expr, (ra.Join, ra.SemiJoin)):
        side, left_key, right_key = _two_sided(key, expr.on, expr.left.schema, expr.right.schema)
        return expr, side, [(expr.left, left_key), (expr.right, right_key)], {}
    if isinstance(expr, ra.AntiJoin):
        if key is None:
            return expr, None, [(expr.left, None), (expr.right, None)], {}
        right_key = key if set(key) == set(expr.on) else (expr.on or None)
        return expr, 0, [(expr.left, key), (expr.right, right_key)], {}
    if isinstance(expr, ra.Difference):
        return expr, None, [(expr.left, key), (expr.right, key)], {}
    if isinstance(expr, ra.Aggregate):
        if key is None or expr.result in key:
            return expr, None, [(expr.body, None), (expr.atom, None)], {}
        group = expr.group
        atom_key = key if group and set(key) == set(group) else (group or None)
        return expr, 0, [(expr.body, key), (expr.atom, atom_key)], {}
    if isinstance(expr, ra.Union):
        return expr, None, [(i, key) for i in expr.inputs], {}
    if isinstance(expr, ra.MultiJoin):  # full, and so are its inputs (see the docstring)
        return expr, None, [(atom, None) for atom, _ in expr.atoms + expr.negated], {}
    if isinstance(expr, ra.Distinct):
        return expr, None, [(expr.input, key)], {}
    raise AssertionError(f"no provenance rule for {type(expr).__name__} at the root: {expr!r}")


def _effective(expr: ra.Expr, key: Key) -> Key:
    """The key `expr` can be kept by: `key`, or None where it has no provenance."""
    if key is None or isinstance(expr, (ra.Recursive, ra.Unit, ra.MultiJoin)):
        return None
    if isinstance(expr, ra.Aggregate) and expr.result in key:
        return None  # derived from an aggregate value
    if isinstance(expr, (ra.Join, ra.SemiJoin)):
        side, _, _ = _two_sided(key, expr.on, expr.left.schema, expr.right.schema)
        return key if side is not None else None
    return key


class Provenance:
    """Plans keys over one program's expressions; memoized across calls (one per graph)."""

    def __init__(
        self, resolve: Callable[[ra.Scan], ra.Expr | None], is_source: Callable[[ra.Expr], bool]
    ) -> None:
        self.resolve = resolve
        self.is_source = is_source
        self._memo: dict[tuple[int, Key], Keyed] = {}

    def plan(self, expr: ra.Expr, key: Key) -> Keyed:
        """The KeyedPlan of `expr` upqueried by `key` (None: full)."""
        root = self._node(expr, key)
        stack = [root]
        while stack:
            node = stack.pop()
            if node.planned:
                continue
            node.planned = True
            _, side, inputs, pushed = _plan_inputs(node.expr, node.key, self.is_source)
            node.side = side
            node.pushed = pushed
            node.inputs = [self._node(e, k) for e, k in inputs]
            stack.extend(node.inputs)
        return root

    def _node(self, expr: ra.Expr, key: Key) -> Keyed:
        if key == ():
            key = None
        # Derived scans resolve to their relation's expression (possibly through several
        # relations defined as one another), so every reader shares its nodes.
        seen: set[str] = set()
        while isinstance(expr, ra.Scan):
            derived = self.resolve(expr)
            if derived is None:
                break
            if expr.relation in seen:
                raise AssertionError(f"{expr.relation!r} depends on itself outside a recursive stratum")
            seen.add(expr.relation)
            expr = derived
        key = _effective(expr, key)
        memo_key = (id(expr), key)
        node = self._memo.get(memo_key)
        if node is None:
            node = self._memo[memo_key] = Keyed(expr, key)
        return node
