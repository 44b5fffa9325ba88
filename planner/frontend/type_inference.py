"""Type inference for derived attributes (pomo_logic §2.2): sources declare their types; a
derived relation's are inferred from its rules, to a fixed point so that recursion works,
and what nothing constrains is ANY."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import ErrorSink
from pomoview.planner.frontend.relations import Relation
from pomoview.planner.frontend.rule_checks import RuleChecker
from pomoview.planner.frontend.values import ANY


def infer_types(
    rules: list[ast.Rule],
    relations: dict[str, Relation],
    user: Collection[str],
    instantaneous: set[str],
    scratch: ErrorSink,
) -> None:
    """Infers derived attribute types to a fixed point (recursion reads types that are not
    inferred yet): a worklist that rechecks the rules reading a relation whose types grew.
    A rule is rechecked at most once per attribute it reads, so this stays linear-ish even
    for a long recursive cycle. Errors go to `scratch`: the caller checks again, reporting."""
    readers: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        for lit in rule.body:
            if not isinstance(lit, ast.Constraint):
                atom = lit if isinstance(lit, ast.Atom) else lit.atom
                readers.setdefault(atom.relation, []).append(i)
    queue = deque(range(len(rules)))
    queued = set(queue)
    while queue:
        i = queue.popleft()
        queued.discard(i)
        head = relations.get(rules[i].head.relation)
        before = len(head.types) if head is not None else 0
        RuleChecker(rules[i], relations, scratch, user, instantaneous).check()
        if head is not None and len(head.types) != before:
            for j in readers.get(head.name, ()):
                if j not in queued:
                    queued.add(j)
                    queue.append(j)


def type_the_untyped(derived: Iterable[Relation]) -> None:
    """Gives ANY to every derived attribute inference left without a type: the result of a
    user-defined aggregate, or an attribute only ever copied from itself through recursion
    (whose relation is empty, yet may be a view whose keys are looked up: values.coerce
    takes any value as a key of it)."""
    for rel in derived:
        for attr in rel.attributes:
            rel.types.setdefault(attr, ANY)
