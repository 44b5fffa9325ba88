"""Keyset pagination of an ordered view: a key's rows after a given row, in the view's order.

A page is cut from the key's rows as a lookup returns them (in order, at most the view's
limit), all read at one epoch, so pages read at one epoch (`min_epoch`) neither skip nor
repeat a row. `after` holds at least the order attributes. With every attribute (the
previous page's last row as it is) the page starts right after that very row, ties broken
by the whole row as the view orders them; with the order attributes only, rows that tie
with `after` on all of them count as at `after`, and are not in the page.

A page that starts at or past the end of a key's window, when the window holds the view's
whole limit, is refused: the view has no rows past its limit, so such a page would answer
"nothing more" where the source has more rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pomoview.dataflow.operators.top_k import sort_key
from pomoview.dataflow.state.keyed_state import Row
from pomoview.planner.frontend.relations import ViewOrder
from pomoview.server.errors import InvalidArgument


@dataclass(frozen=True)
class Page:
    """What a paged lookup asked: at most `limit` rows (None: up to the view's limit) after
    `after` (attribute -> value, checked against the view's types; None: from the first)."""

    limit: int | None
    after: Mapping[str, object] | None


def check_page(view: str, order: ViewOrder | None, attributes: Sequence[str], page: Page) -> None:
    """Refuses a page of an unordered view, a limit below 1, or an `after` that lacks an
    order attribute or names one the view lacks."""
    if order is None:
        raise InvalidArgument(
            f"view {view!r} has no order, so its rows have no pages: declare it with `order by ...` "
            "to page through them with limit and after"
        )
    if page.limit is not None and page.limit < 1:
        raise InvalidArgument(f"limit is {page.limit}; a page holds at least one row")
    if page.after is None:
        return
    unknown = [a for a in page.after if a not in attributes]
    if unknown:
        raise InvalidArgument(f"after names {', '.join(map(repr, unknown))}, which view {view!r} lacks")
    lacking = [a for a, _ in order.by if a not in page.after]
    if lacking:
        raise InvalidArgument(
            f"after lacks the order attribute{'s' if len(lacking) > 1 else ''} "
            f"{', '.join(map(repr, lacking))} of view {view!r}: it says where the page starts"
        )


def cut_page(
    rows: list[Row], order: ViewOrder, attributes: Sequence[str], page: Page, view: str
) -> list[Row]:
    """The page of one key's rows (`rows`: in the view's order, as a lookup returns them)."""
    start = 0
    if page.after is not None:
        start = _first_after(rows, order, attributes, page.after)
        if order.limit is not None and len(rows) >= order.limit and start >= len(rows):
            raise InvalidArgument(
                f"the page after {dict(page.after)} is past the limit of view {view!r} "
                f"({order.limit} rows per key): the view holds no rows after its last"
            )
    end = len(rows) if page.limit is None else start + page.limit
    return rows[start:end]


def _first_after(
    rows: list[Row], order: ViewOrder, attributes: Sequence[str], after: Mapping[str, object]
) -> int:
    """The position of the first row strictly after `after` (binary search: the rows are in
    the view's order)."""
    positions = {a: i for i, a in enumerate(attributes)}
    columns = tuple((positions[a], d) for a, d in order.by)
    whole = len(after) == len(attributes)
    if whole:
        key = sort_key(columns)
        bound = key(tuple(after[a] for a in attributes))
    else:  # the order attributes only: ties with `after` count as at it
        prefix = sort_key(columns)
        bound = prefix(tuple(after.get(a) for a in attributes))[:-1]

        def key(row: Row) -> tuple[object, ...]:
            return prefix(row)[:-1]

    low, high = 0, len(rows)
    while low < high:
        mid = (low + high) // 2
        if bound < key(rows[mid]):
            high = mid
        else:
            low = mid + 1
    return low
