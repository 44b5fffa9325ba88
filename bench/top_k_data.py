"""bench/top_k.py's data and peers: the seeded stories and votes, written as Parquet; the
sorted Python model of each author's windows; DuckDB's `ORDER BY ... LIMIT` over the same
files; and the answers' check."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

LIMIT = 10
HOURS = 365 * 24
Pairs = list[tuple[int, int]]  # (id, created) or (id, votes), in the view's order


def zipf(rng: np.random.Generator, n: int, count: int) -> np.ndarray:
    """`count` ids in 1..n, id k with weight k^-1.08."""
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -1.08)
    return np.searchsorted(cdf / cdf[-1], rng.random(count), side="right").astype(np.int64) + 1


# -- the data and the sorted model -----------------------------------------------------------


class Data:
    """The seeded rows, and the sorted model: each author's stories in each view's order,
    kept up to date with the delete phase's writes."""

    def __init__(self, scale: float, seed: int = 1) -> None:
        self.n_authors = max(50, round(10_000 * scale))
        self.n_stories = max(500, round(100_000 * scale))
        self.n_votes = max(10_000, round(2_000_000 * scale))
        rng = np.random.default_rng(seed)
        self.author = zipf(rng, self.n_authors, self.n_stories)  # of story id i + 1
        self.created = rng.integers(0, HOURS, self.n_stories).astype(np.int64)
        self.vote_story = zipf(rng, self.n_stories, self.n_votes)
        votes = np.bincount(self.vote_story, minlength=self.n_stories + 1)
        self.stories = {
            i + 1: (int(a), int(c)) for i, (a, c) in enumerate(zip(self.author, self.created, strict=True))
        }
        self.votes: list[int] = votes.tolist()
        self.by_author: dict[int, set[int]] = {}
        for story, (author, _) in self.stories.items():
            self.by_author.setdefault(author, set()).add(story)
        self.sorted: dict[str, dict[int, Pairs]] = {"newest": {}, "top": {}}
        for author in self.by_author:
            self._sort(author)

    def write(self, folder: Path) -> dict[str, Path]:
        ids = np.arange(1, self.n_stories + 1, dtype=np.int64)
        paths = {"story": folder / "story.parquet", "vote": folder / "vote.parquet"}
        story = pa.table({"id": ids, "author_id": self.author, "created": self.created})
        users = np.arange(self.n_votes, dtype=np.int64)
        for name, table in (
            ("story", story),
            ("vote", pa.table({"story_id": self.vote_story, "user": users})),
        ):
            pq.write_table(table, paths[name])
        return paths

    def _sort(self, author: int) -> None:
        ids = self.by_author.get(author, set())
        newest = sorted((-self.stories[i][1], i) for i in ids)
        top = sorted((-self.votes[i], i) for i in ids)
        self.sorted["newest"][author] = [(i, -c) for c, i in newest]
        self.sorted["top"][author] = [(i, -v) for v, i in top]

    def answer(self, view: str, author: int) -> Pairs:
        """The model's lookup: the author's first LIMIT rows (the timed peer)."""
        return self.sorted[view].get(author, [])[:LIMIT]

    def all_rows(self, author: int) -> set[tuple[int, int]]:
        return {(i, self.stories[i][1]) for i in self.by_author.get(author, ())}

    def count(self, author: int) -> int:
        return len(self.by_author.get(author, ()))

    def delete(self, story: int) -> dict[str, int]:
        author, created = self.stories.pop(story)
        self.by_author[author].discard(story)
        self._sort(author)
        return {"id": story, "author_id": author, "created": created}

    def insert(self, story: int, author: int, created: int) -> dict[str, int]:
        self.stories[story] = (author, created)
        self.votes += [0] * (story + 1 - len(self.votes))
        self.by_author.setdefault(author, set()).add(story)
        self._sort(author)
        return {"id": story, "author_id": author, "created": created}

    def vote(self, story: int) -> None:
        self.votes[story] += 1
        self._sort(self.stories[story][0])


class Duck:
    """DuckDB over the same Parquet files: each lookup one query, in the views' order."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.con = duckdb.connect()
        story, vote = (str(paths[k]).replace("'", "''") for k in ("story", "vote"))
        self.sql = {
            "newest": f"SELECT id, created FROM '{story}' WHERE author_id = $1 {{}}"
            f" ORDER BY created DESC, id LIMIT {LIMIT}",
            "top": f"SELECT s.id, count(v.story_id) AS votes FROM '{story}' s"
            f" LEFT JOIN '{vote}' v ON v.story_id = s.id WHERE s.author_id = $1 {{}}"
            f" GROUP BY s.id ORDER BY votes DESC, s.id LIMIT {LIMIT}",
        }

    def answer(self, view: str, author: int, deleted: Sequence[int] = ()) -> Pairs:
        column = "s.id" if view == "top" else "id"
        left_out = f"AND {column} NOT IN ({', '.join(map(str, deleted))})" if deleted else ""
        return [
            (int(a), int(b))
            for a, b in self.con.execute(self.sql[view].format(left_out), [author]).fetchall()
        ]


class Check:
    """Counts the answers compared; keeps a line per mismatch."""

    def __init__(self) -> None:
        self.count = 0
        self.wrong: list[str] = []

    def same(self, got: object, want: object, what: str) -> None:
        self.count += 1
        if got != want:
            self.wrong.append(f"{what}: {got} != {want}")


def pairs(view: str, rows: Sequence[dict[str, object]]) -> Pairs:
    second = "votes" if view == "top" else "created"
    return [(int(r["id"]), int(r[second])) for r in rows]  # type: ignore[call-overload]
