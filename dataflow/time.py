"""Timestamps (PomoFlow §2.5): root epochs, refined by one iteration counter per nested circuit.

A timestamp is a tuple of unsigned integers: `(epoch,)` at the root circuit,
`(epoch, iteration)` inside a child circuit, `(epoch, i, j)` inside a child of a
child, and so on. Timestamps of one circuit all have the same length.

Two orders matter:

* the *product order* (`leq`): `s <= t` when every component of `s` is at most
  the matching component of `t`. It is partial: `(0, 2)` and `(1, 1)` are not
  comparable. Differences, traces and joins are defined over it.
* the *evaluation order*: circuits visit times lexicographically (epoch after
  epoch; inside an epoch, iteration after iteration), which is a linear
  extension of the product order, so when time t runs every time `s <= t` has
  already run.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from operator import le

Time = tuple[int, ...]


def validate(time: Time) -> Time:
    """Returns `time` after checking it is a non-empty tuple of unsigned ints."""
    if not time or not all(type(c) is int and c >= 0 for c in time):
        raise ValueError(f"a timestamp is a non-empty tuple of unsigned integers, not {time!r}")
    return time


def leq(s: Time, t: Time) -> bool:
    """Product order: every component of `s` is <= its counterpart in `t`."""
    assert len(s) == len(t), (s, t)
    return all(map(le, s, t))


def lt(s: Time, t: Time) -> bool:
    return s != t and leq(s, t)


def lub(s: Time, t: Time) -> Time:
    """The least upper bound (join) in product order: the componentwise max."""
    assert len(s) == len(t), (s, t)
    return tuple(map(max, s, t))


def glb(s: Time, t: Time) -> Time:
    """The greatest lower bound (meet) in product order: the componentwise min."""
    assert len(s) == len(t), (s, t)
    return tuple(map(min, s, t))


def corners(t: Time) -> Iterator[tuple[Time, int]]:
    """The times `t - s` for s in {0,1}^d with the sign (-1)^|s|, skipping negative components.

    The delta of a function f over the product-ordered lattice at t (its Möbius
    inversion) is `sum(sign * f(c) for c, sign in corners(t))`; a time with a -1
    component stands for "before the beginning", where f is zero.
    """
    for steps in product((0, 1), repeat=len(t)):
        corner = tuple(c - s for c, s in zip(t, steps, strict=True))
        if min(corner) >= 0:
            yield corner, -1 if sum(steps) % 2 else 1


def advance(time: Time, epoch: int) -> Time:
    """Compaction (Differential Dataflow's advance-by): folds a time before `epoch` onto `epoch - 1`.

    Once the root circuit runs epoch e, no time it will see again has an epoch
    below e, so every earlier epoch compares the same way with them as e - 1
    does: traces may merge all of them into e - 1, which bounds their size by
    the number of distinct inner coordinates rather than by the number of epochs.
    """
    if time[0] < epoch - 1:
        return (epoch - 1,) + time[1:]
    return time
