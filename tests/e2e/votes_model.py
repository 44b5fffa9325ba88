"""Plain-Python oracle for examples/votes.pomo: the view computed from scratch over the same writes."""

from __future__ import annotations

from collections import Counter


class VotesModel:
    def __init__(self) -> None:
        self.articles: set[tuple[int, str]] = set()
        self.votes: set[tuple[int, int]] = set()
        # Votes per article, kept with `votes`: a scan of every vote per article made checking
        # 1,000 articles of a minute's load (135,000 votes) take minutes.
        self._counts: Counter[int] = Counter()

    def apply(self, source: str, insert: list[dict], delete: list[dict]) -> None:
        rel = self.articles if source == "article" else self.votes
        attrs = ("id", "title") if source == "article" else ("article_id", "user_id")
        for row in insert:
            t = tuple(row[a] for a in attrs)
            if rel is self.votes and t not in rel:
                self._counts[t[0]] += 1
            rel.add(t)  # type: ignore[arg-type]
        for row in delete:
            t = tuple(row[a] for a in attrs)
            if rel is self.votes and t in rel:
                self._counts[t[0]] -= 1
            rel.discard(t)  # type: ignore[arg-type]

    def view(self, article_id: int) -> list[dict]:
        count = self._counts[article_id]
        return sorted(
            ({"id": i, "title": t, "votes": count} for i, t in self.articles if i == article_id),
            key=lambda r: r["title"],
        )
