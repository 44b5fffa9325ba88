"""A reader's taps (dataflow/operators/reader.py): a tapped key hands each tap the changes
applied to it, and is pinned: an eviction sweep passes it by, and a state above its reader
gives up only the keys whose eviction would not reach it (dataflow/eviction.py), while the
reader's other keys still go."""

from __future__ import annotations

from pomoview.dataflow.node import Filters
from pomoview.dataflow.state.keyed_state import Key, Row
from pomoview.dataflow.zset import ZSet
from pomoview.planner.compile import ProgramGraph, compile_program

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: I, title: T, votes: N) :- article(id: I, title: T), N := count : vote(article_id: I).
"""
VIEW = ("articleWithVotes", ("id",))
ARTICLES = [(i, f"article {i}") for i in range(40)]
VOTE_ROWS = [(u % 40, u) for u in range(800)]


def fetch(source: str, names: tuple[str, ...], keys: list[Key], filters: Filters) -> list[Row]:
    rows = ARTICLES if source == "article" else VOTE_ROWS
    wanted = set(keys)
    return [r for r in rows if not names or (r[0],) in wanted]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[tuple[Row, int]]] = []

    def capture(self, changes: list[tuple[Row, int]]) -> None:
        self.calls.append(list(changes))


def built() -> ProgramGraph:
    graph = ProgramGraph(compile_program(VOTES), partial=True)
    graph.lookup(*VIEW, [(i,) for i in range(40)], fetch)
    return graph


def votes(*rows: tuple[int, int], weight: int = 1) -> dict[str, ZSet[Row]]:
    z: ZSet[Row] = ZSet()
    for row in rows:
        z.add(row, weight)
    return {"vote": z}


def test_a_tap_gets_its_keys_changes_and_no_others() -> None:
    graph = built()
    reader = graph.graph.readers[VIEW]
    tap = Recorder()
    reader.tap([(3,)], tap)
    graph.step(votes((3, 9001), (4, 9002)))
    assert [sorted(c) for c in tap.calls] == [[((3, "article 3", 20), -1), ((3, "article 3", 21), 1)]]
    reader.untap([(3,)], tap)
    graph.step(votes((3, 9003)))
    assert len(tap.calls) == 1, "an untapped key sends nothing"
    assert not reader.taps and not reader.state.pinned


def test_a_pinned_key_survives_eviction_with_what_it_is_derived_from_above() -> None:
    graph = built()
    reader = graph.graph.readers[VIEW]
    tap = Recorder()
    reader.tap([(5,)], tap)
    above = [n for n in graph.graph.nodes if n is not reader and n.eviction_state() is not None]
    assert above and all(n.eviction_state().present_keys() == 40 for n in above)  # type: ignore[union-attr]
    done = graph.graph.evict(10**9)  # everything that may go
    assert done.keys > 0
    assert reader.state.keys() == [(5,)], "only the pinned key is left at the reader"
    # Every state above is keyed by the article, as the reader is: evicting any other key
    # there reaches no pinned key, so everything but article 5 goes (before, nothing above
    # went while a key was pinned, and the states above grew without bound).
    for node in above:
        assert node.eviction_state().keys() == [(5,)], node.describe()  # type: ignore[union-attr]
    graph.graph.check_invariants()
    # The pinned key still follows its writes.
    graph.step(votes((5, 9100)))
    assert [sorted(c) for c in tap.calls] == [[((5, "article 5", 20), -1), ((5, "article 5", 21), 1)]]
    assert reader.read((5,)) == [(5, "article 5", 21)]
    # Unpinned, it goes like any other key, above too.
    reader.untap([(5,)], tap)
    graph.graph.evict(10**9)
    assert reader.state.keys() == []
    assert all(node.eviction_state().present_keys() == 0 for node in above)  # type: ignore[union-attr]


def test_two_taps_on_one_key_pin_it_until_both_are_gone() -> None:
    graph = built()
    reader = graph.graph.readers[VIEW]
    a, b = Recorder(), Recorder()
    reader.tap([(7,)], a)
    reader.tap([(7,), (8,)], b)
    reader.untap([(7,)], a)
    graph.graph.evict(10**9)
    assert sorted(reader.state.keys()) == [(7,), (8,)]
    graph.step(votes((7, 9200)))
    assert a.calls == [] and len(b.calls) == 1
