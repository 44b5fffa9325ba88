"""What depends on what in a program: the precedence graph and its strata (pomo_logic §2.3),
content ids inside a recursion, and the instantaneous relations that time checks read (§2.1)."""

from __future__ import annotations

from pomoview.planner.frontend import ast
from pomoview.planner.frontend.errors import ErrorSink
from pomoview.planner.frontend.relations import Relation
from pomoview.planner.frontend.stratify import Edge, Stratum, stratify

_EDGE_KIND = {
    ast.Atom: ("atom", False),
    ast.CidBinding: ("content id", False),
    ast.Negation: ("negation", True),
    ast.Aggregate: ("aggregate", True),
}


def dependency_edges(relations: dict[str, Relation]) -> list[Edge]:
    """The precedence graph of §2.3 over derived relations: deductive rules only."""
    edges: list[Edge] = []
    for name, relation in relations.items():
        for rule in relation.rules:
            if rule.inductive:
                continue
            for lit in rule.body:
                if isinstance(lit, ast.Constraint):
                    continue
                atom = lit if isinstance(lit, ast.Atom) else lit.atom
                target = relations.get(atom.relation)
                if target is None or target.kind != "derived":
                    continue
                kind, negative = _EDGE_KIND[type(lit)]
                edges.append(Edge(name, atom.relation, negative, lit.position, kind))
    return edges


def stratify_relations(relations: dict[str, Relation], errors: ErrorSink) -> list[Stratum]:
    derived = [n for n, r in relations.items() if r.kind == "derived"]
    strata, bad = stratify(derived, dependency_edges(relations))
    for problem in bad:
        edge = problem.edge
        errors.error(
            edge.position,
            f"the program cannot be stratified: the cycle {problem.describe(12)} goes through "
            f"this {edge.kind} ({edge.head} depends negatively on {edge.body})",
        )
    return strata


def check_recursive_cids(
    relations: dict[str, Relation], strata: list[Stratum], errors: ErrorSink
) -> None:
    """Refuses `C := atom` over a relation of the rule's own recursive stratum.

    A CID is a new value for every new tuple, so a recursive rule that puts the CID of a
    tuple of its own stratum into a head derives new tuples without end (pomo_logic §2.3
    leaves this open: "we may want to constrain the use of content identifiers in mutually
    recursive rules"). We refuse it rather than let the fixed point run until its limit.
    """
    for stratum in strata:
        if not stratum.recursive:
            continue
        members = set(stratum.relations)
        for name in stratum.relations:
            for rule in relations[name].rules:
                if rule.inductive:
                    continue
                for lit in rule.body:
                    if isinstance(lit, ast.CidBinding) and lit.atom.relation in members:
                        errors.error(
                            lit.position,
                            f"the content id of {lit.atom.relation!r} is taken inside its own "
                            f"recursive stratum ({', '.join(sorted(members))}): every new tuple "
                            "would have a new id, so the recursion would never end",
                        )


def positive_atoms(rule: ast.Rule) -> list[ast.Atom]:
    return [
        lit if isinstance(lit, ast.Atom) else lit.atom
        for lit in rule.body
        if isinstance(lit, (ast.Atom, ast.CidBinding))
    ]


def instantaneous(relations: dict[str, Relation]) -> set[str]:
    """The relations that are empty in an epoch without events (§2.1's TODO, our reading).

    A relation is *instantaneous* when it is a transient source, or a derived
    relation without inductive rules each of whose rules reads an instantaneous
    relation positively (an atom or `C := atom`). This is the greatest such set,
    computed by removing candidates until nothing changes (so recursion through
    instantaneous relations keeps them instantaneous). We require EVERY rule to
    read one, not just some: a relation that is also derived from persistent
    data does not empty itself, and an inductive rule reading it could then
    change the IDB forever over a static EDB, which is what §2.1 forbids.
    """
    candidates = {
        n
        for n, r in relations.items()
        if r.transient or (r.kind == "derived" and not any(rule.inductive for rule in r.rules))
    }
    # Worklist, linear in the program: `support[i]` counts rule i's positive atoms over
    # candidates (with repeats); a rule at 0 evicts its head, which lowers the counts of
    # the rules that read the head.
    rules = [(n, rule) for n in candidates if relations[n].kind == "derived" for rule in relations[n].rules]
    support = [0] * len(rules)
    readers: dict[str, list[int]] = {}
    for i, (_, rule) in enumerate(rules):
        for atom in positive_atoms(rule):
            if atom.relation in candidates:
                support[i] += 1
                readers.setdefault(atom.relation, []).append(i)
    evicted = [head for i, (head, _) in enumerate(rules) if support[i] == 0]
    while evicted:
        name = evicted.pop()
        if name not in candidates:
            continue
        candidates.discard(name)
        for i in readers.get(name, ()):
            support[i] -= 1
            if support[i] == 0:
                evicted.append(rules[i][0])
    return candidates
