"""Plus (PomoFlow §2.9.15): the sum of two ZSets, weight by weight.

Contract: linear (in both inputs), stateless. Weights of equal elements are
added and elements left with weight zero dropped. `Plus` is `Union` (the
N-ary form the planner builds) restricted to two inputs, so it shares its
evaluation and its upquery: both inputs are asked for the same columns and
keys and the answers are added; a missing key is each input's business.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from pomoview.dataflow.node import Node
from pomoview.dataflow.operators.union import Union
from pomoview.dataflow.zset import ZSet

E = TypeVar("E", bound=Hashable)


def plus(a: ZSet[E], b: ZSet[E]) -> ZSet[E]:
    return a + b


class Plus(Union):
    def __init__(self, a: Node, b: Node) -> None:
        super().__init__((a, b))

    def describe(self) -> str:
        return f"Plus{self.schema}"
