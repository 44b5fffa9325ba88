"""Ordered views with a limit (`view v(k) order by ... limit N`), served end to end: the real
server, Spark and gRPC, against a sorted Python model of the same rows after random writes
(inserts, deletes, rows moving across the window, ties on the order attribute)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pomoview.client import Client
from pomoview.client.errors import PomoviewError

from .server_process import ServerProcess

PROGRAM = """
source story(author: int, id: int, created: int).

newest(author: A, id: I, created: C) :- story(author: A, id: I, created: C).
oldest(author: A, id: I, created: C) :- story(author: A, id: I, created: C).

view newest(author) order by created desc, id limit 3.
view oldest(author) order by created, id desc.
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


def test_a_subscription_to_a_view_with_a_limit_is_refused(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        with pytest.raises(PomoviewError) as err:
            next(iter(db.subscribe("newest", [{"author": 1}])))
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "has a limit (3)" in str(err.value)
        sub = db.subscribe("oldest", [{"author": 1}])  # an order without a limit is served
        first = next(iter(sub))
        assert first.snapshot
        sub.close()


def test_describe_names_the_top_k(ordered_server: ServerProcess) -> None:
    with ordered_server.client() as db:
        db.lookup("newest", {"author": 0})
        described = str(db.describe("newest"))
        assert "TopK(order by" in described and "limit 3" in described
