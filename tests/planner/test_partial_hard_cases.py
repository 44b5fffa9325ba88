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
thread(cid: C, title: T, name: N) :-
    comment(cid: C, story_id: S), story(id: S, author_id: A, title: T), author(author_id: A, name: N).
feed(id: I, text: X) :- comment(story_id: I, text: X).
feed(id: I, text: N) :- storyWithAuthor(id: I, name: N).
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


def complete(
    m: Model, view: str, values: list[tuple[object, ...]], key: tuple[str, ...] = ("id",)
) -> list[set[tuple[object, ...]]]:
    p = m.begin(view, key, values)
    for _ in range(10):
        rows = m.attempt(p)
        if rows is not None:
            got = [set(r) for r in rows]
            assert got == m.reference(view, key, values)
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
        return {n.detail: n for n in m.partial.graph.node_infos("storyWithAuthor") if n.stateful}

    def by_operator(infos: dict[str, NodeInfo], operator: str) -> NodeInfo:
        [info] = [i for i in infos.values() if i.operator == operator]
        return info

    before = states()
    m.write({"author": {(10, "ann"): -1, (10, "ann2"): 1}})
    after = states()
    reader, join = by_operator(after, "Reader"), by_operator(after, "Join")
    assert reader.present_keys == 3 and reader.evictions == 0
    # Author 10 is present: its delta is applied to the present stories 1 and 2 only; had
    # the join emitted rows for story 3, the reader would have dropped them (missing key).
    assert join.dropped == by_operator(before, "Join").dropped
    assert reader.dropped == by_operator(before, "Reader").dropped
    assert reader.rows == 3
    assert {d: i.dropped for d, i in after.items()} == {d: i.dropped for d, i in before.items()}
    m.write({"author": {(30, "cy"): 1}})  # an author no state holds: dropped at the source
    dropped = {d: i.dropped - before[d].dropped for d, i in states().items()}
    dropped = {d: n for d, n in dropped.items() if n}
    assert dropped == {"SourceIndex(author by ('author_id',), partial)": 1}
    assert complete(m, "storyWithAuthor", [(1,), (2,), (4,)]) == [
        {(1, "s1", "ann2")}, {(2, "s2", "ann2")}, {(4, "s4", "bob")}
    ]
    reader = next(n for n in m.partial.graph.node_infos() if n.operator == "Reader")
    assert reader.present_keys == 3  # story 3 was never filled by the write
    m.check_states()
    assert complete(m, "storyWithAuthor", [(3,)]) == [{(3, "s3", "ann2")}]


def test_a_join_chain_upqueried_by_its_far_end_while_writes_move_every_link() -> None:
    """thread by comment id: the comment is fetched by id, its story by the comment's
    story_id, the story's author by author_id: one dependent round per link. Between the
    rounds, writes move the comment to another story, give that story another author, and
    rename that author: each round must ask for the link as it is now, and the answer is
    the chain at the last epoch."""
    m = model()
    p = m.begin("thread", ("cid",), [(100,)])
    moves: list[dict[str, dict[tuple[object, ...], int]]] = [
        {"comment": {(100, 1, "c1"): -1, (100, 4, "c1"): 1}},
        {"story": {(4, 20, "s4"): -1, (4, 10, "s4!"): 1}},
        {"author": {(10, "ann"): -1, (10, "anna"): 1}},
    ]
    asked: list[set[str]] = []
    for move in moves:
        before = set(p.requests)
        assert m.attempt(p) is None
        asked.append({r.source for r in p.requests - before})
        m.write(move)
    assert asked == [{"comment"}, {"story"}, {"author"}]
    rows = m.attempt(p)
    assert rows is not None and [set(rows[0])] == m.reference("thread", ("cid",), [(100,)])
    assert set(rows[0]) == {(100, "s4!", "anna")}
    m.check_graph()
    m.check_states()
    # A present key's link moves to an author no state holds: the join evicts comment 100
    # (a write never upqueries), and the next lookup fills it again.
    m.write({"story": {(4, 10, "s4!"): -1, (4, 20, "s4"): 1}})
    reader = next(n for n in m.partial.graph.node_infos("thread") if n.operator == "Reader")
    assert reader.present_keys == 0 and reader.evictions == 1
    assert complete(m, "thread", [(100,)], ("cid",)) == [{(100, "s4", "bob")}]
    m.check_graph()
    m.check_states()


def test_a_union_whose_join_parent_answers_rounds_after_its_source_parent() -> None:
    """feed by story id: one parent is a source (one fetch), the other a join (a dependent
    upquery: story, then author). The source parent's fetch is answered at the first round;
    writes to both parents go on while the join parent needs two more rounds. The answer
    counts every write once."""
    m = model()
    p = m.begin("feed", ("id",), [(2,)])
    assert m.attempt(p) is None
    assert sorted(r.source for r in p.requests) == ["comment", "story"]
    m.write({"comment": {(102, 2, "c3"): 1}, "story": {(2, 10, "s2"): -1, (2, 20, "s2"): 1}})
    assert m.attempt(p) is None  # comment filled; the story answered: its author next
    assert sorted({r.source for r in p.requests}) == ["author", "comment", "story"]
    m.write({"comment": {(101, 2, "c2"): -1}, "author": {(20, "bob"): -1, (20, "rob"): 1}})
    rows = m.attempt(p)
    assert rows is not None and set(rows[0]) == {(2, "c3"), (2, "rob")}
    assert [set(rows[0])] == m.reference("feed", ("id",), [(2,)])
    m.check_graph()
    m.check_states()
