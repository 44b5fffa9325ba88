"""The hit replica's copy (server/replica/table.py) on its own: what it answers, what it
sends back to the server, and that no answer through the replica is older than one before
it. The copy's equality with the server's readers is tests/server/test_replica_feed.py."""

from __future__ import annotations

import random
import threading

from pomoview.planner.frontend.relations import Relation
from pomoview.server.replica.messages import Changes, Outbox, Reads, Views
from pomoview.server.replica.table import ReplicaTable

NAME = ("v", ("k",))


def encode(rows: list[tuple[object, ...]]) -> bytes:
    return repr(rows).encode()


def table(catch_up: float = 0.0) -> ReplicaTable:
    t = ReplicaTable(catch_up=catch_up)
    t.apply(Views({"v": Relation("v", ["k", "x"], {"k": "int", "x": "int"}, "derived", None)}, 3))  # type: ignore[arg-type]
    return t


def test_a_hit_needs_every_key_and_reads_one_epoch() -> None:
    t = table()
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)], (2,): [(2, 20), (2, 21)]})]))
    assert t.hits(NAME, [(1,), (2,)], None, encode, "rows") == ([b"[(1, 10)]", b"[(2, 20), (2, 21)]"], 4)
    assert t.hits(NAME, [(1,), (3,)], None, encode, "rows") is None  # a missing key: the server
    assert t.hits(("v", ("x",)), [(10,)], None, encode, "rows") is None  # no such reader here
    assert t.hits(NAME, [(1,)], 5, encode, "rows") is None  # min_epoch past the copy


def test_a_change_replaces_the_cached_form_and_a_gone_key_misses() -> None:
    t = table()
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)]})]))
    assert t.hits(NAME, [(1,)], None, encode, "rows") == ([b"[(1, 10)]"], 4)
    t.apply(Changes(5, [(NAME, {(1,): [(1, 11)]})]))
    assert t.hits(NAME, [(1,)], None, encode, "rows") == ([b"[(1, 11)]"], 5)
    t.apply(Changes(6, [(NAME, {(1,): None})]))
    assert t.hits(NAME, [(1,)], None, encode, "rows") is None
    assert t.keys(NAME) == {}


def test_a_new_program_drops_the_copy() -> None:
    t = table()
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)]})]))
    t.apply(Views({}, 9))
    assert t.hits(NAME, [(1,)], None, encode, "rows") is None
    assert t.epoch == 9 and t.relations == {}


def test_no_answer_is_older_than_one_the_server_gave_through_the_replica() -> None:
    t = table()
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)]})]))
    t.seen(5)  # the server answered a lookup at epoch 5; the copy is still at 4
    assert t.hits(NAME, [(1,)], None, encode, "rows") is None
    t.apply(Changes(5, [(NAME, {(1,): [(1, 11)]})]))
    assert t.hits(NAME, [(1,)], None, encode, "rows") == ([b"[(1, 11)]"], 5)


def test_a_hit_behind_the_seen_epoch_waits_for_the_copy() -> None:
    t = table(catch_up=60.0)
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)]})]))
    t.seen(5)
    got: list[object] = []
    started = threading.Event()

    def hit() -> None:
        started.set()
        got.append(t.hits(NAME, [(1,)], None, encode, "rows"))

    reader = threading.Thread(target=hit)
    reader.start()
    started.wait()
    t.apply(Changes(5, [(NAME, {(1,): [(1, 11)]})]))
    reader.join()
    assert got == [([b"[(1, 11)]"], 5)]


def test_the_reads_go_back_once() -> None:
    t = table()
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)], (2,): [(2, 20)]})]))
    assert t.take_reads() is None
    t.hits(NAME, [(1,)], None, encode, "rows")
    t.hits(NAME, [(1,), (2,)], None, encode, "columns")
    reads = t.take_reads()
    assert reads is not None and reads.hits == 2
    assert [(name, sorted(keys)) for name, keys in reads.keys] == [(NAME, [(1,), (2,)])]  # type: ignore[type-var]
    assert t.take_reads() is None
    assert isinstance(reads, Reads)


def test_a_min_epoch_waits_here_only_for_an_epoch_acknowledged_here() -> None:
    t = table(catch_up=60.0)
    t.apply(Changes(4, [(NAME, {(1,): [(1, 10)]})]))
    assert t.hits(NAME, [(1,)], 5, encode, "rows") is None  # epoch 5 is not known to be coming
    t.acked(5)  # a write through the replica was acknowledged at 5
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(t.hits(NAME, [(1,)], 5, encode, "rows")))
    reader.start()
    t.apply(Changes(5, [(NAME, {(1,): [(1, 11)]})]))
    reader.join()
    assert got == [([b"[(1, 11)]"], 5)]


def test_the_outbox_merges_messages_into_what_leaves_the_same_copy() -> None:
    """A replica that falls behind gets the feed's outbox merged: at most a reset and one
    message of changes, which give the same copy as every message applied, for random
    sequences of resets and changes."""
    rng = random.Random(31)
    relations = {"v": Relation("v", ["k", "x"], {"k": "int", "x": "int"}, "derived", None)}  # type: ignore[arg-type]
    for _ in range(200):
        messages: list[Views | Changes] = []
        epoch = 0
        for _ in range(rng.randrange(1, 8)):
            epoch += rng.randrange(2)
            if rng.random() < 0.15:
                messages.append(Views(relations, epoch))  # type: ignore[arg-type]
            else:
                keys = {(rng.randrange(4),): rng.choice([None, [(1, rng.randrange(9))]]) for _ in range(3)}
                messages.append(Changes(epoch, [(NAME, keys)]))
        one_by_one, at_once = table(), table()
        for message in messages:
            one_by_one.apply(message)
        outbox = Outbox()
        for message in messages:
            outbox.put(message)
        merged = outbox.take()
        assert merged is not None
        for message in merged:
            at_once.apply(message)
        assert len(merged) <= 2
        assert at_once.keys(NAME) == one_by_one.keys(NAME) and at_once.epoch == one_by_one.epoch
