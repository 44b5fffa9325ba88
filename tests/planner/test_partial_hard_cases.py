"""The hard cases of partial state, each a test of its own (as ReadySet's integration tests
name them), driven like the server drives the graph: fetches held while writes go on, then
answered from the sources as they are at the retry. Oracle: the fully materialized graph."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from partial_model import Model  # noqa: E402

from pomoview.dataflow.introspect import NodeInfo  # noqa: E402
from pomoview.planner.compile import compile_program  # noqa: E402

PROGRAM = """
source story(id: int, author_id: int, title: string).
source author(author_id: int, name: string).
source comment(cid: int, story_id: int, text: string).
source note(sid: int, text: string).
storyWithAuthor(id: I, title: T, name: N) :-
    story(id: I, author_id: A, title: T), author(author_id: A, name: N).
said(id: I, text: X) :- comment(story_id: I, text: X).
said(id: I, text: X) :- note(sid: I, text: X).
"""


def model() -> Model:
    m = Model(compile_program(PROGRAM))
    m.write({
        "author": {(10, "ann"): 1, (20, "bob"): 1},
        "story": {(1, 10, "s1"): 1, (2, 10, "s2"): 1, (3, 10, "s3"): 1, (4, 20, "s4"): 1},
        "comment": {(100, 1, "c1"): 1, (101, 2, "c2"): 1},
        "note": {(1, "n1"): 1},
    })
    return m


def complete(m: Model, view: str, values: list[tuple[object, ...]]) -> list[set[tuple[object, ...]]]:
    p = m.begin(view, ("id",), values)
    for _ in range(10):
        rows = m.attempt(p)
        if rows is not None:
            got = [set(r) for r in rows]
            assert got == m.reference(view, ("id",), values)
            return got
    raise AssertionError("did not settle")


def test_a_partial_join_upqueried_on_one_parent() -> None:
    """By story id: the first round asks only the story side, by id; the author side is asked
    next, by the join key its answer holds (a dependent upquery), and only for that key."""
    m = model()
    p = m.begin("storyWithAuthor", ("id",), [(4,)])
    assert m.attempt(p) is None
    assert [(r.source, r.columns, r.keys) for r in p.requests] == [("story", ("id",), ((4,),))]
    assert m.attempt(p) is None
    asked = sorted((r.source, r.columns, r.keys) for r in p.requests)
    assert asked == [("author", ("author_id",), ((20,),)), ("story", ("id",), ((4,),))]
    assert [set(r) for r in m.attempt(p) or []] == [{(4, "s4", "bob")}]
    [join] = [n for n in m.partial.graph.node_infos() if n.operator == "Join"]
    assert join.partial and join.present_keys == 2  # story 4 and author 20, nothing else
    m.check_graph()
    m.check_states()


def test_an_upquery_arrives_while_another_for_an_overlapping_key_is_being_filled() -> None:
    m = model()
    first = m.begin("storyWithAuthor", ("id",), [(1,), (2,)])
    second = m.begin("storyWithAuthor", ("id",), [(2,), (3,)])
    assert m.attempt(first) is None and m.attempt(second) is None
    m.write({"author": {(10, "ann"): -1, (10, "anna"): 1}, "story": {(2, 10, "s2"): -1, (2, 20, "s2"): 1}})
    assert m.attempt(second) is None  # its story fetch answered: now it needs the authors
    m.write({"story": {(3, 10, "s3"): -1, (3, 10, "s3!"): 1}})
    assert m.attempt(first) is None  # story 2 is present (the second filled it): authors next
    for p in (second, first, second):
        rows = m.attempt(p)
        if rows is not None:
            assert [set(r) for r in rows] == m.reference(p.view, p.key, p.values)
    assert complete(m, "storyWithAuthor", [(1,), (2,), (3,)]) == [
        {(1, "s1", "anna")}, {(2, "s2", "bob")}, {(3, "s3!", "anna")}
    ]
    m.check_graph()
    m.check_states()


def test_a_union_whose_parents_answer_at_different_epochs() -> None:
    """Both parents are asked in one round; the comment side's answer comes first and fills
    its source index, the note side's comes two epochs later. Writes to both parents in
    between are counted exactly once in the answer."""
    m = model()
    p = m.begin("said", ("id",), [(1,)])
    assert m.attempt(p) is None
    assert sorted(r.source for r in p.requests) == ["comment", "note"]
    comment_only = {r for r in p.requests if r.source == "comment"}
    held = p.requests - comment_only
    p.requests = comment_only
    assert m.attempt(p) is None  # the comment parent answered, the note parent not yet
    m.write({"comment": {(102, 1, "c3"): 1, (100, 1, "c1"): -1}, "note": {(1, "n2"): 1}})
    m.write({"note": {(1, "n1"): -1}, "comment": {(103, 1, "c4"): 1}})
    p.requests |= held
    rows = m.attempt(p)
    assert rows is not None and set(rows[0]) == {(1, "c3"), (1, "c4"), (1, "n2")}
    assert [set(rows[0])] == m.reference("said", ("id",), [(1,)])
    m.check_graph()
    m.check_states()


def test_a_write_on_the_other_side_reaches_exactly_the_present_downstream_keys() -> None:
    """Author 10 wrote stories 1, 2 and 3; only 1 and 2 were looked up. Renaming author 10
    updates the present keys 1 and 2 through the index of present story rows by author,
    and story 3 stays missing (its rows never enter any state)."""
    m = model()
    complete(m, "storyWithAuthor", [(1,), (2,), (4,)])
    def states() -> dict[str, NodeInfo]:
        return {n.operator: n for n in m.partial.graph.node_infos() if n.operator in ("Join", "Reader")}

    before = states()
    m.write({"author": {(10, "ann"): -1, (10, "ann2"): 1}})
    after = states()
    assert after["Reader"].present_keys == 3 and after["Reader"].evictions == 0
    assert after["Join"].dropped == before["Join"].dropped  # author 10 is present: applied
    m.write({"author": {(30, "cy"): 1}})  # an author no state holds: dropped at the source
    assert complete(m, "storyWithAuthor", [(1,), (2,), (4,)]) == [
        {(1, "s1", "ann2")}, {(2, "s2", "ann2")}, {(4, "s4", "bob")}
    ]
    reader = next(n for n in m.partial.graph.node_infos() if n.operator == "Reader")
    assert reader.present_keys == 3  # story 3 was never filled by the write
    m.check_states()
    assert complete(m, "storyWithAuthor", [(3,)]) == [{(3, "s3", "ann2")}]
