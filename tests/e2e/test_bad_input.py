"""Bad input gets the right status, a message naming what and where, and changes nothing."""

from __future__ import annotations

import pytest

from pomoview.client import InvalidArgument, NotFound

from .server_process import ServerProcess


@pytest.fixture(scope="module")
def seeded(votes_server: ServerProcess) -> int:
    with votes_server.client() as db:
        db.write("article", insert=[{"id": 77, "title": "seed"}])
        epoch = db.write("vote", insert=[{"article_id": 77, "user_id": 1}])
        assert db.lookup("articleWithVotes", {"id": 77}, min_epoch=epoch)
        return epoch


def _unchanged(db, before_epoch: int) -> None:  # type: ignore[no-untyped-def]
    assert db.stats()["durable_epoch"] == before_epoch
    assert db.lookup("articleWithVotes", {"id": 77}) == [{"id": 77, "title": "seed", "votes": 1}]


def test_syntax_error_names_line_and_column(votes_server: ServerProcess, seeded: int) -> None:
    program = "source a(x: int).\nview b(x).\nb(x: X) :- a(x: X) X > 1.\n"
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument) as err:
            db.install(program, "bad.pomo")
        assert "bad.pomo:3:20:" in str(err.value)
        assert "^" in str(err.value)
        # The installed program is untouched: the vote view still answers.
        _unchanged(db, seeded)


def test_unknown_attribute_in_program_is_positioned(
    votes_server: ServerProcess, seeded: int
) -> None:
    program = "source a(x: int).\nview b(x).\nb(x: X) :- a(y: X).\n"
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument) as err:
            db.install(program, "attr.pomo")
        assert "attr.pomo:3:14:" in str(err.value)
        assert "no attribute 'y'" in str(err.value)
        _unchanged(db, seeded)


@pytest.mark.parametrize(
    ("source", "insert", "delete", "needle"),
    [
        ("nosuch", [{"id": 1}], [], "unknown source 'nosuch'"),
        ("vote", [{"article_id": 1}], [], "missing attribute user_id"),
        ("vote", [{"article_id": 1, "user_id": 2, "extra": 3}], [], "unknown attribute extra"),
        ("vote", [{"article_id": "one", "user_id": 2}], [], "attribute 'article_id': expected int"),
        ("article", [{"id": 1, "title": 5}], [], "attribute 'title': expected string"),
        (
            "vote",
            [{"article_id": 77, "user_id": 3}],
            [{"article_id": 77, "user_id": 3}],
            "both inserts and deletes",
        ),
    ],
)
def test_bad_write_is_refused_and_changes_nothing(
    votes_server: ServerProcess, seeded: int, source: str, insert: list, delete: list, needle: str
) -> None:
    with votes_server.client() as db:
        # A valid change ride along in the same batch must not be applied either.
        good = {"vote": ([{"article_id": 77, "user_id": 42}], [])}
        changes = (
            {**good, source: (insert, delete)}
            if source != "vote"
            else {source: (insert + good["vote"][0], delete)}
        )
        with pytest.raises(InvalidArgument) as err:
            db.write_batch(changes)
        assert needle in str(err.value)
        _unchanged(db, seeded)


def test_unknown_view_is_not_found(votes_server: ServerProcess, seeded: int) -> None:
    with votes_server.client() as db:
        with pytest.raises(NotFound) as err:
            db.lookup("noSuchView", {"id": 1})
        assert "noSuchView" in str(err.value)
        with pytest.raises(InvalidArgument):
            db.lookup("articleWithVotes", {"nope": 1})
        _unchanged(db, seeded)
