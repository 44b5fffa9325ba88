"""The key provenance pass (planner/provenance.py): which key each operator is kept by,
and where there is none. Pure: no circuits are built."""

from __future__ import annotations

from pomoview.planner.compile import compile_program
from pomoview.planner.ir import ra
from pomoview.planner.ir.provenance import Keyed, Provenance

SCHEMA = """
source story(id: int, author_id: int, title: string).
source author(author_id: int, name: string).
source comment(cid: int, story_id: int, text: string).
"""


def plan(program: str, view: str, key: tuple[str, ...] | None) -> Keyed:
    compiled = compile_program(SCHEMA + program)

    def is_source(expr: ra.Expr) -> bool:
        return isinstance(expr, ra.Scan) and compiled.relations[expr.relation].kind != "derived"

    def resolve(scan: ra.Scan) -> ra.Expr | None:
        return None if is_source(scan) else compiled.exprs[scan.relation]

    return Provenance(resolve, is_source).plan(compiled.exprs[view], key)


def walk(root: Keyed) -> list[Keyed]:
    out: list[Keyed] = []
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(node.inputs)
    return out


def of(root: Keyed, kind: type) -> list[Keyed]:
    return [k for k in walk(root) if isinstance(k.expr, kind)]


def scans(root: Keyed) -> dict[str, ra.Expr | None]:
    """source -> the key its index is kept by (via pushed selections too)."""
    out: dict[str, object] = {}
    for k in walk(root):
        if isinstance(k.expr, ra.Scan):
            out[k.expr.relation] = k.key
    return out  # type: ignore[return-value]


STORY_WITH_AUTHOR = """
storyWithAuthor(id: I, title: T, name: N) :-
    story(id: I, author_id: A, title: T), author(author_id: A, name: N).
"""


def test_a_key_of_one_join_input_keys_that_side_and_the_other_by_the_join_columns() -> None:
    root = plan(STORY_WITH_AUTHOR, "storyWithAuthor", ("id",))
    [join] = of(root, ra.Join)
    assert join.key == ("I",) and join.side == 0  # columns are the rule's variables
    assert join.inputs[1].key == ("A",)  # the other side: by the join columns
    assert scans(root) == {"story": ("id",), "author": ("author_id",)}
    assert all(k.key is not None for k in walk(root))


def test_a_key_of_the_right_input_keys_the_right_side() -> None:
    root = plan(STORY_WITH_AUTHOR, "storyWithAuthor", ("name",))
    [join] = of(root, ra.Join)
    assert join.side == 1 and join.key == ("N",) and join.inputs[0].key == ("A",)
    assert scans(root) == {"story": ("author_id",), "author": ("name",)}


def test_the_join_columns_key_both_sides_alike() -> None:
    root = plan("v(a: A, t: T) :- story(author_id: A, title: T), author(author_id: A).\n", "v", ("a",))
    [join] = of(root, ra.SemiJoin) + of(root, ra.Join)
    assert join.side == 0
    assert [i.key for i in join.inputs] == [join.key, join.key]


def test_a_superset_of_the_join_columns_from_one_side_is_kept_by_that_side() -> None:
    root = plan(STORY_WITH_AUTHOR, "storyWithAuthor", ("id", "title"))
    [join] = of(root, ra.Join)
    assert join.side == 0 and set(join.key or ()) == {"I", "T"}
    assert join.inputs[1].key == join.expr.on


def test_a_subset_of_multi_column_join_columns_keeps_one_side() -> None:
    program = """
source e(x: int, y: int, z: int).
source f(x: int, y: int, w: int).
v(x: X, y: Y, z: Z, w: W) :- e(x: X, y: Y, z: Z), f(x: X, y: Y, w: W).
"""
    root = plan(program, "v", ("x",))
    [join] = of(root, ra.Join)
    assert join.side == 0 and join.key == ("X",)
    assert set(join.inputs[1].key or ()) == {"X", "Y"}


def test_a_key_across_both_sides_that_is_not_the_join_columns_has_no_provenance() -> None:
    root = plan(STORY_WITH_AUTHOR, "storyWithAuthor", ("title", "name"))
    [join] = of(root, ra.Join)
    assert join.key is None and all(i.key is None for i in join.inputs)
    assert set(scans(root).values()) == {None}


def test_a_chain_of_joins_keys_every_keyed_side_down_to_the_first_source() -> None:
    program = """
view thread(cid).
thread(cid: C, text: X, title: T, name: N) :- comment(cid: C, story_id: S, text: X),
    story(id: S, author_id: A, title: T), author(author_id: A, name: N).
"""
    root = plan(program, "thread", ("cid",))
    joins = of(root, ra.Join)
    assert len(joins) == 2 and all(j.key is not None and j.side == 0 for j in joins)
    keys = scans(root)
    # Each join's other side is kept by its join columns: the dependent upqueries.
    assert keys == {"comment": ("cid",), "story": ("id",), "author": ("author_id",)}


def test_unions_projections_and_constants_pass_the_key() -> None:
    program = """
named(id: I, who: N) :- story(id: I, author_id: A), author(author_id: A, name: N).
named(id: I, who: "anonymous") :- comment(cid: I).
"""
    root = plan(program, "named", ("id",))
    assert len(of(root, ra.Union)) == 1
    assert all(k.key is not None for k in walk(root) if not isinstance(k.expr, ra.Unit))
    # A key of only the constant column has nothing to trace: that branch is full.
    root = plan(program, "named", ("who",))
    [union] = of(root, ra.Union)
    assert union.key == ("who",)
    keys = scans(root)
    assert keys["comment"] is None and keys["author"] is not None


def test_a_content_id_passes_the_key_unless_the_key_is_the_content_id() -> None:
    program = "ids(id: I, c: C) :- C := story(id: I).\n"
    root = plan(program, "ids", ("id",))
    assert [k.key for k in of(root, ra.CidExtend)] == [("id",)]
    assert scans(root) == {"story": ("id",)}
    root = plan(program, "ids", ("c",))
    assert scans(root)["story"] is None


def test_an_aggregate_keyed_by_its_group_or_by_body_columns() -> None:
    program = """
per(author_id: A, n: N) :- author(author_id: A), N := count : story(author_id: A).
named(name: M, n: N) :- author(author_id: A, name: M), N := count : story(author_id: A).
total(author_id: A, n: N) :- author(author_id: A), N := count : story().
"""
    [agg] = of(plan(program, "per", ("author_id",)), ra.Aggregate)
    assert agg.side == 0 and [i.key for i in agg.inputs] == [agg.key, agg.key]
    [agg] = of(plan(program, "named", ("name",)), ra.Aggregate)
    assert agg.side == 0 and agg.key == ("M",) and agg.inputs[1].key == ("A",)
    # No group: the aggregate is one global group, kept full; the body stays partial.
    [agg] = of(plan(program, "total", ("author_id",)), ra.Aggregate)
    assert agg.key is not None and agg.inputs[1].key is None
    # A key on the aggregate's value: derived from a value, no provenance.
    [agg] = of(plan(program, "per", ("n",)), ra.Aggregate)
    assert agg.key is None and all(i.key is None for i in agg.inputs)


def test_an_antijoin_keys_its_left_and_the_right_by_the_antijoin_columns() -> None:
    program = "quiet(id: I) :- story(id: I, author_id: A), !author(author_id: A).\n"
    [anti] = of(plan(program, "quiet", ("id",)), ra.AntiJoin)
    assert anti.side == 0 and anti.key == ("I",) and anti.inputs[1].key == anti.expr.on


def test_recursion_is_full_whatever_the_key() -> None:
    program = """
source edge(x: int, y: int).
reach(x: X, y: Y) :- edge(x: X, y: Y).
reach(x: X, y: Z) :- reach(x: X, y: Y), edge(x: Y, y: Z).
"""
    root = plan(program, "reach", ("x",))
    recursive = of(root, ra.Recursive)
    assert recursive and all(k.key is None for k in recursive)


def test_plans_are_shared_per_operator_and_key() -> None:
    compiled = compile_program(SCHEMA + STORY_WITH_AUTHOR)

    def is_source(expr: ra.Expr) -> bool:
        return isinstance(expr, ra.Scan) and compiled.relations[expr.relation].kind != "derived"

    provenance = Provenance(lambda s: None if is_source(s) else compiled.exprs[s.relation], is_source)
    expr = compiled.exprs["storyWithAuthor"]
    assert provenance.plan(expr, ("id",)) is provenance.plan(expr, ("id",))
    assert provenance.plan(expr, ("id",)) is not provenance.plan(expr, ("name",))


def test_a_5000_atom_body_plans_without_recursion() -> None:
    atoms = ", ".join(f"author(author_id: A{i}, name: N)" for i in range(5000))
    root = plan(f"wide(name: N) :- {atoms}.\n", "wide", ("name",))
    assert len(walk(root)) > 5000
