"""Plain-Python oracle for examples/votes.pomo: the view computed from scratch over the same writes."""

from __future__ import annotations


class VotesModel:
    def __init__(self) -> None:
        self.articles: set[tuple[int, str]] = set()
        self.votes: set[tuple[int, int]] = set()

    def apply(self, source: str, insert: list[dict], delete: list[dict]) -> None:
        rel = self.articles if source == "article" else self.votes
        attrs = ("id", "title") if source == "article" else ("article_id", "user_id")
        for row in insert:
            rel.add(tuple(row[a] for a in attrs))  # type: ignore[arg-type]
        for row in delete:
            rel.discard(tuple(row[a] for a in attrs))  # type: ignore[arg-type]

    def view(self, article_id: int) -> list[dict]:
        count = sum(1 for a, _ in self.votes if a == article_id)
        return sorted(
            ({"id": i, "title": t, "votes": count} for i, t in self.articles if i == article_id),
            key=lambda r: r["title"],
        )
