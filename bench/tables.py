"""The benchmarks' plain-text tables (shared by bench/top_k.py, recursive_lookup_table.py and
triangles_table.py)."""

from __future__ import annotations

from collections.abc import Sequence


def table(title: str, header: str, rows: Sequence[tuple[str, ...]]) -> None:
    """Prints `rows` under the columns of `header` (names separated by "|")."""
    print(f"\n{title}")
    names = tuple(header.split("|"))
    widths = [max(len(r[i]) for r in [names, *rows]) for i in range(len(names))]
    for r in [names, *rows]:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
