"""The upquery driver: walks a plan of any depth in a constant number of Python frames.

An upquery travels from a reader up through every operator of its path to the sources, and
a plan can be thousands of operators deep (a rule body of 5,000 atoms is a chain of 5,000
joins). When each operator called its input's `query`, the lookup took two or three frames
per operator and a deep plan died of RecursionError. So no operator calls another's step
method. A step that needs its input's answer *yields* an `Ask` for it and is sent the answer
(or has the input's exception thrown into it, at the yield); `run` drives the steps with an
explicit stack of generators. The interpreter's stack stays a few frames deep whatever the
plan's depth; the plan's depth costs one suspended generator per operator, on the heap.

A step method (`Node.upquery`, `upquery_grouped`, `upquery_indexed`, `covers_step`) returns
either its answer, when it asks nothing of its inputs (a source index, a full state, a
leaf), or an `Upquery` generator that yields its asks and returns its answer. Exceptions
cross steps as they did calls: a `FetchPending` raised at a source index is thrown into each
step below it in turn, where `ask_all` catches it to ask its other inputs too.

Invariant (checked by `tests/planner/test_deep_plans.py`): `run` keeps the Python stack
within a constant bound for any plan depth.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from types import GeneratorType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pomoview.dataflow.node import EvictCols, Node

T = TypeVar("T")

# A step that asks its inputs: yields Asks, is sent each answer, returns its own answer.
Upquery = Generator["Ask", Any, T]


@dataclass(frozen=True, slots=True)
class Ask:
    """One step to run for a waiting step: `step(*args)`, a node's step method."""

    step: Callable[..., Any]
    args: tuple[Any, ...]


def rows(node: Node, cols: tuple[int, ...], keys: Collection[Any]) -> Ask:
    """Ask for `node`'s output rows whose `cols` are among `keys` (a ZSet)."""
    return Ask(node.upquery, (cols, keys))


def grouped(node: Node, cols: tuple[int, ...], keys: Collection[Any]) -> Ask:
    """Ask for `node`'s rows split by key (`Node.query_grouped`'s answer)."""
    return Ask(node.upquery_grouped, (cols, keys))


def indexed(node: Any, cols: tuple[int, ...], keys: Collection[Any]) -> Ask:
    """Ask an IndexWith for its rows as an IndexedZSet."""
    return Ask(node.upquery_indexed, (cols, keys))


def covered(node: Node, cols: tuple[int, ...], key: Any) -> Ask:
    """Ask whether `node`'s nearest states above hold `key` on `cols` (a bool)."""
    return Ask(node.covers_step, (cols, key))


def run(first: Ask) -> Any:
    """The answer of `first`, running every step it asks for on an explicit stack.

    Equivalent to calling the steps recursively: an exception a step raises is thrown into
    the step that asked for it, and propagates out of `run` if no step catches it."""
    stack: list[Upquery[Any]] = []
    answer: Any = None
    error: Exception | None = None
    ask: Ask | None = first
    while True:
        if ask is not None:
            try:
                started = ask.step(*ask.args)
            except Exception as err:  # a step that answers directly raised: as a call would
                answer, error = None, err
            else:
                if isinstance(started, GeneratorType):
                    stack.append(started)
                    answer, error = None, None  # starts the generator
                else:
                    answer, error = started, None
            ask = None
        if not stack:
            if error is not None:
                raise error
            return answer
        top = stack[-1]
        try:
            ask = top.throw(error) if error is not None else top.send(answer)
        except StopIteration as stop:
            stack.pop()
            answer, error = stop.value, None
        except Exception as err:
            stack.pop()
            answer, error = None, err


def ask_all(asks: Sequence[Ask]) -> Upquery[list[Any]]:
    """Asks every one of `asks` even when some raise FetchPending, then raises one
    FetchPending with all their requests; else returns their answers in order. Use as
    `answers = yield from ask_all([...])` inside a step."""
    from pomoview.dataflow.node import FetchPending

    answers: list[Any] = []
    pending: list[FetchPending] = []
    for ask in asks:
        try:
            answers.append((yield ask))
        except FetchPending as err:
            pending.append(err)
    if pending:
        raise FetchPending.merge(pending)
    return answers


def all_cover(asks: Iterable[Ask]) -> Upquery[bool]:
    """True when every one of `asks` (each a `covered`) answers True; stops at the first False."""
    for ask in asks:
        if not (yield ask):
            return False
    return True


# -- evictions flow down, the same way: a worklist instead of a call per operator -----------

_local = threading.local()


def deliver_eviction(consumers: Iterable[tuple[Node, int]], cols: EvictCols, keys: Collection[Any]) -> None:
    """Calls `consumer.on_evict(port, cols, keys)` for each consumer, and for every eviction
    those calls pass on further down, before returning. An `on_evict` that passes an
    eviction on (through `Node.evict_below`) only queues it, so an eviction down a chain of
    N operators takes a constant number of frames. Order does not matter: evicting a key
    is idempotent and each message names its own keys."""
    queue: deque[tuple[Node, int, EvictCols, Collection[Any]]] | None = getattr(_local, "queue", None)
    if queue is not None:  # inside a delivery: the outermost one runs it
        queue.extend((consumer, port, cols, keys) for consumer, port in consumers)
        return
    queue = deque((consumer, port, cols, keys) for consumer, port in consumers)
    _local.queue = queue
    try:
        while queue:
            consumer, port, message_cols, message_keys = queue.popleft()
            consumer.on_evict(port, message_cols, message_keys)
    finally:
        _local.queue = None
