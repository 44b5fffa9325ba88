"""NestedWcoj against a non-incremental reference: for random streams of one recursive
relation R at (epoch, iteration) and of two relations E, F from outside (changing at
iteration 0), each output at (e, k) equals the four corners of the whole join,
J(e, k) - J(e-1, k) - J(e, k-1) + J(e-1, k-1), with J(e, k) = R(e, k) ⋈ E(e) ⋈ F(e)
recomputed from the relations' values by brute force (DBSP's nested incremental join)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from pomoview.dataflow.node import Node, Value
from pomoview.dataflow.operators.nested_wcoj import NestedWcoj
from pomoview.dataflow.operators.wcoj import Compare, WcojJoin
from pomoview.dataflow.state.collection_index import IndexRegistry
from pomoview.dataflow.time import Time
from pomoview.dataflow.zset import ZSet

Pair = tuple[int, int]
Rows = dict[tuple[int, int, int], int]
DOMAIN = 5
EPOCHS, ITERATIONS = 4, 4


class Input(Node):
    def __init__(self, schema: tuple[str, ...]) -> None:
        super().__init__(schema, ())

    def eval(self, inputs: Sequence[Value | None], time: Time) -> Value | None:
        raise AssertionError("driven by hand")


def join(r: set[Pair], e: set[Pair], f: set[Pair]) -> Rows:
    # r(A, B), e(B, C), f(A, C), A != C, as sets: each (A, B, C) once.
    return {(a, b, c): 1 for a, b in r for b2, c in e if b2 == b and (a, c) in f and a != c}


def corners(j: dict[tuple[int, int], Rows], e: int, k: int) -> Rows:
    out: Rows = {}
    for (de, dk), sign in (((0, 0), 1), ((1, 0), -1), ((0, 1), -1), ((1, 1), 1)):
        for row, w in j.get((e - de, k - dk), {}).items():
            out[row] = out.get(row, 0) + sign * w
    return {row: w for row, w in out.items() if w}


def difference(new: set[Pair], old: set[Pair]) -> ZSet[Pair]:
    return ZSet([(p, 1) for p in new - old] + [(p, -1) for p in old - new])


def random_set(rng: random.Random, size: int) -> set[Pair]:
    return {(rng.randrange(DOMAIN), rng.randrange(DOMAIN)) for _ in range(size)}


@pytest.mark.parametrize("seed", range(30))
def test_each_output_is_the_four_corners_of_the_whole_join(seed: int) -> None:
    rng = random.Random(seed)
    r, e, f = Input(("A", "B")), Input(("B", "C")), Input(("A", "C"))

    def body(inputs: tuple[Node, ...], indexes: IndexRegistry) -> WcojJoin:
        atoms = (("A", "B"), ("B", "C"), ("A", "C"))
        constraints = (Compare("A", "!=", "C"),)
        return WcojJoin(inputs, atoms, ("A", "B", "C"), constraints, ("r", "e", "f"), indexes=indexes)

    node = NestedWcoj((r, e, f), 0, body)
    # The relations' values: R at each (epoch, iteration), E and F at each epoch.
    rs = {(ep, k): random_set(rng, rng.randrange(0, 12)) for ep in range(EPOCHS) for k in range(ITERATIONS)}
    es = {ep: random_set(rng, rng.randrange(0, 12)) for ep in range(EPOCHS)}
    fs = {ep: random_set(rng, rng.randrange(0, 12)) for ep in range(EPOCHS)}
    whole = {(ep, k): join(rs[ep, k], es[ep], fs[ep]) for ep, k in rs}
    for ep, k in itertools.product(range(EPOCHS), range(ITERATIONS)):
        # R's 2-D delta: the four corners of its values; E's and F's at iteration 0 only.
        delta_r: dict[Pair, int] = {}
        for (de, dk), sign in (((0, 0), 1), ((1, 0), -1), ((0, 1), -1), ((1, 1), 1)):
            for pair in rs.get((ep - de, k - dk), set()):
                delta_r[pair] = delta_r.get(pair, 0) + sign
        inputs: list[Value | None] = [ZSet.of_weights({p: w for p, w in delta_r.items() if w}), None, None]
        if k == 0:
            inputs[1] = difference(es[ep], es.get(ep - 1, set()))
            inputs[2] = difference(fs[ep], fs.get(ep - 1, set()))
        out = node.eval(inputs, (ep, k))
        node.check()
        assert isinstance(out, ZSet)
        assert dict(out.items()) == corners(whole, ep, k), (ep, k)
    assert not node.due, "every held-back product was emitted within its epoch"
