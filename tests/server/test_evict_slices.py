"""The Evict of everything takes the dataflow lock a slice of keys at a time
(server/reads/evictions.py), on a real scheduler: lookups and the apply wait on that lock,
so one hold for the whole of a large state stalled them (1.1 s for 200,000 keys)."""

from __future__ import annotations

from pomoview.server.reads.evictions import evict
from pomoview.server.scheduler.scheduler import Scheduler

from .vote_program import VIEW, VOTES, row


def present_keys(s: Scheduler) -> int:
    graph = s.view_state.graph
    assert graph is not None
    return sum(st.present_keys() for n in graph.graph.nodes if (st := n.eviction_state()))


def test_evicting_everything_lets_go_of_the_lock_between_slices(scheduler: Scheduler) -> None:
    s = scheduler
    s.install(VOTES)
    epoch = s.write([
        ("article", [row(id=i, title=f"t{i}") for i in range(20)], []),
        ("vote", [row(article_id=u % 20, user_id=u) for u in range(100)], []),
    ])
    keys = [row(id=i) for i in range(20)]
    before, _ = s.lookup(VIEW, keys, min_epoch=epoch)
    assert present_keys(s) >= 40  # the two sources' states, and more below them
    with s.view_state.count_locks() as held:
        done = evict(s.view_state, None, None, slice_keys=3)
    # Every key of the sources' states taken where it was, 3 a hold: at least 14 holds.
    assert done.keys >= 40 and held.count >= -(-done.keys // 3), (done, held.count)
    assert present_keys(s) == 0
    after, _ = s.lookup(VIEW, keys)
    assert after == before
