"""The codes of a Trace's settled and recent entries (dataflow/trace.py): the (inner time,
weight) entries of one (key, value) at one epoch, as an int or a flat tuple of ints.

The int `i` is the commonest entry of a closure, weight 1 at the iteration `i` of a
one-level nested time; anything else is the flat tuple (inner time..., weight) per entry,
ordered by inner time. Zero weights are never kept: a code whose entries cancel is None.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

Inner = tuple[int, ...]  # a time without its epoch
Code = int | tuple[int, ...]


def encode(entries: Mapping[Inner, int], depth: int) -> Code | None:
    """The code of settled entries (inner time -> weight, zeros allowed) of times `depth`
    long; None when every weight is zero. One entry of weight 1 at a one-level nested time
    (i,) is the int i; anything else the flat tuple (inner..., weight) per entry, by inner."""
    live = sorted((inner, w) for inner, w in entries.items() if w)
    if not live:
        return None
    if depth == 2 and len(live) == 1 and live[0][1] == 1:
        return live[0][0][0]
    return tuple(itertools.chain.from_iterable((*inner, w) for inner, w in live))


def decode(code: Code, depth: int) -> list[tuple[Inner, int]]:
    """The (inner time, weight) entries of `code` (the inverse of `encode`)."""
    if type(code) is int:
        return [((code,), 1)]
    assert isinstance(code, tuple)
    return [(code[k : k + depth - 1], code[k + depth - 1]) for k in range(0, len(code), depth)]


def code_size(code: Code, depth: int) -> int:
    """The number of entries `code` holds."""
    return 1 if type(code) is int else len(code) // depth  # type: ignore[arg-type]


def iteration_pairs(code: Code) -> Iterable[tuple[int, int]]:
    """The (iteration, weight) entries of the code of (epoch, iteration) times."""
    if type(code) is int:
        return ((code, 1),)
    return zip(code[0::2], code[1::2], strict=True)  # type: ignore[index]


def one_code(inner: Inner, weight: int, depth: int) -> Code:
    """The code of one entry of nonzero weight (`encode` of {inner: weight}, without its sort)."""
    if depth == 2 and weight == 1:
        return inner[0]
    return (*inner, weight)


def merge_codes(a: Code, b: Code, depth: int) -> Code | None:
    """The code of the entries of `a` and `b` summed; None when they cancel out."""
    if depth != 2:
        entries = dict(decode(a, depth))
        for inner, w in decode(b, depth):
            entries[inner] = entries.get(inner, 0) + w
        return encode(entries, depth)
    x: tuple[int, ...] = (a, 1) if type(a) is int else a  # type: ignore[assignment]
    y: tuple[int, ...] = (b, 1) if type(b) is int else b  # type: ignore[assignment]
    if x[-2] < y[0]:  # b's entries all after a's, as an epoch's iterations come: appended
        return x + y
    # Both flat (iteration, weight) pairs by iteration: merged in one pass, without the
    # dict and the sort of `encode` (settling an update's epoch into a closure's codes).
    out: list[int] = []
    i = j = 0
    while i < len(x) and j < len(y):
        if x[i] < y[j]:
            out += x[i : i + 2]
            i += 2
        elif y[j] < x[i]:
            out += y[j : j + 2]
            j += 2
        else:
            w = x[i + 1] + y[j + 1]
            if w:
                out += (x[i], w)
            i += 2
            j += 2
    out += x[i:]
    out += y[j:]
    if not out:
        return None
    if len(out) == 2 and out[1] == 1:
        return out[0]
    return tuple(out)
