"""The vote program and its helpers, shared by the scheduler tests that run it in process."""

from __future__ import annotations

from typing import Any

VOTES = """
source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: Id, title: Title, votes: N) :-
    article(id: Id, title: Title),
    N := count : vote(article_id: Id).
"""
VIEW = "articleWithVotes"


def row(**values: Any) -> dict[str, tuple[str, Any]]:
    """A typed row (a write's or a key's) from plain ints and strings."""
    kinds = {int: "int", str: "string"}
    return {k: (kinds[type(v)], v) for k, v in values.items()}


def encode(rows: list[tuple[object, ...]]) -> bytes:
    """A stand-in wire encoding of a key's rows (order-free)."""
    return repr(sorted(rows)).encode()
