"""Ordered views with a limit (`view v(k) order by ... limit N`), served end to end: the real
server, Spark and gRPC, against a sorted Python model of the same rows after random writes
(inserts, deletes, rows moving across the window, ties on the order attribute)."""

from __future__ import annotations

import contextlib
import json
import queue
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from pomoview.client import Client
from pomoview.client.errors import PomoviewError
from pomoview.client.subscription import Change

from .server_process import ServerProcess, wait_for_flush

PROGRAM = """
source story(author: int, id: int, created: int).

newest(author: A, id: I, created: C) :- story(author: A, id: I, created: C).
oldest(author: A, id: I, created: C) :- story(author: A, id: I, created: C).

plain(author: A, id: I) :- story(author: A, id: I).

view newest(author) order by created desc, id limit 3.
view oldest(author) order by created, id desc.
view plain(author).
"""

AUTHORS = 6
Story = tuple[int, int, int]  # (author, id, created)


def model(stories: set[Story], author: int, descending: bool, limit: int | None) -> list[dict[str, int]]:
    """The author's stories by created (desc or asc), ties by id (asc for newest, desc for
    oldest), cut at `limit`: plain Python."""
    rows = [s for s in stories if s[0] == author]
    if descending:
        rows.sort(key=lambda s: (-s[2], s[1]))
    else:
        rows.sort(key=lambda s: (s[2], -s[1]))
    cut = rows if limit is None else rows[:limit]
    return [{"author": a, "id": i, "created": c} for a, i, c in cut]


@pytest.fixture(scope="module")
def ordered_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = Path(tmp_path_factory.mktemp("ordered"))
    program = folder / "ordered.pomo"
    program.write_text(PROGRAM)
    server = ServerProcess(folder / "data", program=program).start()
    yield server
    server.stop()


def _check(db: Client, stories: set[Story], epoch: int) -> None:
    for author in range(AUTHORS):
        want = model(stories, author, True, 3)
        assert db.lookup("newest", {"author": author}, min_epoch=epoch) == want, (author, epoch)
        assert db.lookup("newest", {"author": author}) == want  # a hit: the cached wire form
        assert db.lookup("oldest", {"author": author}, min_epoch=epoch) == model(stories, author, False, None)
    many = db.lookup_many("newest", [{"author": a} for a in range(AUTHORS)], min_epoch=epoch)
    assert [list(rows) for rows in many.values()] == [model(stories, a, True, 3) for a in range(AUTHORS)]


@pytest.mark.parametrize("columnar", [True, False])
def test_ordered_lookups_match_the_sorted_model_under_random_writes(
    ordered_server: ServerProcess, columnar: bool
) -> None:
    rng = random.Random(23 + columnar)
    with ordered_server.client() as db:
        db.columnar = columnar
        stories: set[Story] = {(s[0], s[1], s[2]) for s in _existing(db)}
        next_id = 1000 * (1 + columnar)
        epoch = 0
        for round_ in range(12):
            inserts: list[Story] = []
            for _ in range(rng.randint(1, 6)):
                # few distinct created times: ties on the order attribute are common
                inserts.append((rng.randrange(AUTHORS), next_id, rng.randrange(5)))
                next_id += 1
            deletes = rng.sample(sorted(stories), min(len(stories), rng.randint(0, 3)))
            if round_ % 3 == 2 and stories:
                # the top row of an author: the window must refill from below its bound
                author = rng.randrange(AUTHORS)
                top = model(stories, author, True, 1)
                deletes += [
                    (r["author"], r["id"], r["created"])
                    for r in top
                    if (r["author"], r["id"], r["created"]) not in deletes
                ]
            epoch = db.write(
                "story",
                insert=[{"author": a, "id": i, "created": c} for a, i, c in inserts],
                delete=[{"author": a, "id": i, "created": c} for a, i, c in deletes],
            )
            stories |= set(inserts)
            stories -= set(deletes)
            _check(db, stories, epoch)


def _existing(db: Client) -> list[tuple[int, int, int]]:
    """The stories earlier tests of this module wrote (the views of every author, unordered)."""
    rows = []
    for author in range(AUTHORS):
        rows += [(r["author"], r["id"], r["created"]) for r in db.lookup("oldest", {"author": author})]
    return rows  # type: ignore[return-value]


def test_a_subscription_to_a_window_sees_rows_enter_and_leave_it(ordered_server: ServerProcess) -> None:
    """The snapshot is the key's window; each change is the rows that entered and left it at
    one epoch; folded in order they equal the sorted model at that epoch (deletes of the top
    row included, which refill the window from the state above)."""
    rng = random.Random(77)
    author = 20
    with ordered_server.client() as db:
        stories = {(author, 9000 + i, rng.randrange(4)) for i in range(6)}
        db.write("story", insert=[{"author": a, "id": i, "created": c} for a, i, c in stories])
        sub = db.subscribe("newest", [{"author": author}])
        changes: queue.Queue[Change] = queue.Queue()

        def collect() -> None:  # the stream, read on a thread: the test waits with a deadline
            with contextlib.suppress(PomoviewError):
                for change in sub:
                    changes.put(change)

        collector = threading.Thread(target=collect, daemon=True)
        collector.start()
        first = changes.get(timeout=60)
        assert first.snapshot
        held = {(r["author"], r["id"], r["created"]) for r in first.inserts}
        windows = {first.epoch: model(stories, author, True, 3)}
        assert sorted(held, key=lambda s: (-s[2], s[1])) == [tuple(r.values()) for r in windows[first.epoch]]
        next_id, epoch = 9100, first.epoch
        for _ in range(10):
            top = model(stories, author, True, 1)
            deletes = {(r["author"], r["id"], r["created"]) for r in top} if rng.random() < 0.6 else set()
            inserts = {(author, next_id + k, rng.randrange(4)) for k in range(rng.randint(0, 2))}
            next_id += 3
            epoch = db.write(
                "story",
                insert=[{"author": a, "id": i, "created": c} for a, i, c in inserts],
                delete=[{"author": a, "id": i, "created": c} for a, i, c in deletes],
            )
            stories = (stories | inserts) - deletes
            windows[epoch] = model(stories, author, True, 3)
        # a last write that surely changes the window, so that the loop below ends
        epoch = db.write("story", insert=[{"author": author, "id": 9999, "created": 100}])
        stories.add((author, 9999, 100))
        windows[epoch] = model(stories, author, True, 3)
        while True:
            change = changes.get(timeout=60)  # raises Empty if the window's change never comes
            for r in change.deletes:
                held.remove((r["author"], r["id"], r["created"]))
            for r in change.inserts:
                held.add((r["author"], r["id"], r["created"]))
            want = [(r["author"], r["id"], r["created"]) for r in windows[change.epoch]]
            assert sorted(held, key=lambda s: (-s[2], s[1])) == want, change.epoch
            if change.epoch == epoch:
                break
        sub.close()
        collector.join(timeout=30)


def test_describe_names_the_top_k(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        db.lookup("newest", {"author": 0})
        described = str(db.describe("newest"))
        assert "TopK(order by created desc, id limit 3)" in described, described
        assert "holds at most 3 rows per key" in described and " rows; " in described
        nodes = db.describe("newest")["nodes"]
        top = [n for n in nodes if n["operator"] == "TopK"]  # type: ignore[index, union-attr]
        assert len(top) == 1 and top[0]["rows"] <= 3 * top[0]["present_keys"], top


def _window_fetched(db: Client) -> tuple[int, int, int]:
    """The newest view's SourceWindow (its fills fetch only each key's first rows): how many
    fills it made, how many rows their Spark jobs returned, and how many windows ran short
    (evicted), from Stats (its states are the graph's nodes)."""
    nodes = db.stats()["states"]
    [node] = [n for n in nodes if n["operator"] == "SourceWindow"]  # type: ignore[union-attr]
    found = re.search(r"(\d+) fills fetched (\d+) rows; \d+ keys cut; (\d+) ran short", node["detail"])  # type: ignore[index]
    assert found is not None, node
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def test_a_cold_lookup_fetches_only_the_window(ordered_server: ServerProcess) -> None:
    """40 stories of one author in Parquet: the cold lookup's one Spark job returns the 3 rows
    of the window (ORDER BY ... LIMIT in the job), not 40. Deleting the top row leaves the
    window short: the key is evicted and looked up again in the background, with one job of
    3 rows (4 when the delete is still in the log, not in Parquet)."""
    author = 31
    with ordered_server.client() as db:
        stories = {(author, 8000 + i, i % 7) for i in range(40)}
        epoch = db.write("story", insert=[{"author": a, "id": i, "created": c} for a, i, c in stories])
        wait_for_flush(db, epoch)
        db.lookup("newest", {"author": 0})  # the reader exists
        fills, fetched, short = _window_fetched(db)
        jobs = db.stats()["spark_jobs"]
        assert db.lookup("newest", {"author": author}, min_epoch=epoch) == model(stories, author, True, 3)
        assert _window_fetched(db) == (fills + 1, fetched + 3, short)
        assert db.stats()["spark_jobs"] == jobs + 1  # type: ignore[operator]
        # A read right after a delete of the top row: the delete left the window short and
        # evicted it; the background refill and the read share one job, which asks for one
        # tuple more when the delete is still in the log, not in Parquet.
        top = model(stories, author, True, 1)[0]
        epoch = db.write("story", delete=[top])
        stories.discard((top["author"], top["id"], top["created"]))
        assert db.lookup("newest", {"author": author}, min_epoch=epoch) == model(stories, author, True, 3)
        assert db.stats()["spark_jobs"] == jobs + 2  # type: ignore[operator]
        now = _window_fetched(db)
        assert now[0] == fills + 2 and now[1] - fetched - 3 in (3, 4) and now[2] == short + 1, now
        # Without a read, the background refill fills the window again: the read after it
        # is a hit.
        top = model(stories, author, True, 1)[0]
        epoch = db.write("story", delete=[top])
        stories.discard((top["author"], top["id"], top["created"]))
        _wait_until(lambda: _window_fetched(db)[0] == fills + 3, "the background refill")
        assert db.stats()["spark_jobs"] == jobs + 3  # type: ignore[operator]
        assert db.lookup("newest", {"author": author}, min_epoch=epoch) == model(stories, author, True, 3)
        assert db.stats()["spark_jobs"] == jobs + 3 and _window_fetched(db)[0] == fills + 3  # type: ignore[operator]


def _wait_until(done: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Polls the server until `done()` (as `wait_for_flush` does), or fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.1)


def test_a_subscription_holds_a_cut_window_whole(ordered_server: ServerProcess) -> None:
    """A key whose window was fetched cut (8 stories in Parquet, 3 fetched) and is then
    subscribed to is fetched again whole: deletes of its top rows refill the window in the
    step, and the subscription's changes fold to the sorted model at every epoch."""
    author = 32
    with ordered_server.client() as db:
        stories = {(author, 8500 + i, i) for i in range(8)}
        epoch = db.write("story", insert=[{"author": a, "id": i, "created": c} for a, i, c in stories])
        wait_for_flush(db, epoch)
        assert db.lookup("newest", {"author": author}, min_epoch=epoch) == model(stories, author, True, 3)
        jobs = db.stats()["spark_jobs"]
        sub = db.subscribe("newest", [{"author": author}])
        changes = iter(sub)
        first = next(changes)
        held = {(r["author"], r["id"], r["created"]) for r in first.inserts}
        assert db.stats()["spark_jobs"] == jobs + 1  # type: ignore[operator]  # the key, whole
        for _ in range(4):
            top = model(stories, author, True, 1)[0]
            epoch = db.write("story", delete=[top])
            stories.discard((top["author"], top["id"], top["created"]))
            change = next(changes)
            assert change.epoch == epoch
            held -= {(r["author"], r["id"], r["created"]) for r in change.deletes}
            held |= {(r["author"], r["id"], r["created"]) for r in change.inserts}
            want = [(r["author"], r["id"], r["created"]) for r in model(stories, author, True, 3)]
            assert sorted(held, key=lambda s: (-s[2], s[1])) == want
        assert db.stats()["spark_jobs"] == jobs + 1  # type: ignore[operator]  # refilled in the step
        sub.close()


def _pages(db: Client, view: str, author: int, size: int, epoch: int) -> tuple[list[dict], bool]:
    """Every page of `size` of the author's rows, each starting after the last row of the
    one before, until an empty page; and whether the last ask was refused as past the view's
    limit."""
    rows: list[dict] = []
    after = None
    while True:
        try:
            page = db.lookup(view, {"author": author}, min_epoch=epoch, limit=size, after=after)
        except PomoviewError as err:
            assert err.code == grpc.StatusCode.INVALID_ARGUMENT
            assert "past the limit of view" in str(err), str(err)
            return rows, True
        assert len(page) <= size
        if not page:
            return rows, False
        rows += page
        after = page[-1]


def test_pages_cut_the_sorted_rows(ordered_server: ServerProcess) -> None:
    rng = random.Random(5)
    with ordered_server.client() as db:
        stories = [(a, 5000 + i, rng.randrange(3)) for i, a in enumerate([7] * 7 + [8] * 2)]
        epoch = db.write("story", insert=[{"author": a, "id": i, "created": c} for a, i, c in stories])
        for size in (1, 2, 3):
            for author, rows_of in ((7, 7), (8, 2)):
                whole = model(set(stories), author, False, None)
                assert len(whole) == rows_of
                assert _pages(db, "oldest", author, size, epoch) == (whole, False)
                newest = model(set(stories), author, True, 3)
                # a full window (3 rows of 7) ends in a refusal; a short one in an empty page
                assert _pages(db, "newest", author, size, epoch) == (newest, rows_of >= 3)
        # `after` with the order attributes only (not the author)
        whole = model(set(stories), 7, False, None)
        first = whole[0]
        page = db.lookup(
            "oldest", {"author": 7}, limit=10, after={"created": first["created"], "id": first["id"]}
        )
        assert page == whole[1:]


def test_a_page_after_a_concurrent_insert_neither_repeats_nor_skips(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        epoch = db.write("story", insert=[{"author": 9, "id": 6000 + i, "created": 10 * i} for i in range(6)])
        first = db.lookup("oldest", {"author": 9}, min_epoch=epoch, limit=3)
        assert [r["id"] for r in first] == [6000, 6001, 6002]
        # before the cursor, and after it
        epoch = db.write(
            "story",
            insert=[{"author": 9, "id": 6100, "created": 5}, {"author": 9, "id": 6101, "created": 25}],
        )
        second = db.lookup("oldest", {"author": 9}, min_epoch=epoch, limit=3, after=first[-1])
        assert [r["id"] for r in second] == [6101, 6003, 6004]


def test_bad_pages_are_refused(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        db.write("story", insert=[{"author": 4, "id": 7000, "created": 1}])
        cases = [
            ("plain", {"limit": 2}, "has no order"),
            ("oldest", {"after": {"id": 7000}}, "lacks the order attribute 'created'"),
            ("oldest", {"after": {"created": 1, "id": 7000, "nope": 2}}, "after names 'nope'"),
            ("oldest", {"after": {"created": "one", "id": 7000}}, "after.created"),
        ]
        for view, page, words in cases:
            with pytest.raises(PomoviewError) as err:
                db.lookup(view, {"author": 4}, **page)  # type: ignore[arg-type]
            assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT, (view, page)
            assert words in str(err.value), (view, page, str(err.value))
        with pytest.raises(ValueError, match="limit must be >= 1"):
            db.lookup("oldest", {"author": 4}, limit=0)


def test_the_command_line_prints_a_page_in_the_views_order(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        stories = [(11, 8000 + i, c) for i, c in enumerate([3, 9, 1, 7])]
        epoch = db.write("story", insert=[{"author": a, "id": i, "created": c} for a, i, c in stories])
        db.lookup("newest", {"author": 11}, min_epoch=epoch)

    def cli(*more: str) -> list[dict[str, int]]:
        command = [sys.executable, "-m", "pomoview.server.cli", "lookup", "--address", ordered_server.address]
        done = subprocess.run(
            [*command, "newest", "author=11", *more], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    first = cli("--limit", "2")
    assert first == model(set(stories), 11, True, 3)[:2]
    assert cli("--limit", "2", "--after", json.dumps(first[-1])) == model(set(stories), 11, True, 3)[2:]


def test_a_page_of_an_unknown_view_is_not_found(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        with pytest.raises(PomoviewError) as err:
            db.lookup("nope", {"author": 1}, limit=2)
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        assert "no view named 'nope' (views: newest, oldest, plain)" in str(err.value)
