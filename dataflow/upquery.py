"""The upquery driver: walks a plan of any depth in a constant number of Python frames, and
returns the fetches it could not make as data, to be resumed once they are at hand.

An upquery travels from a reader up through every operator of its path to the sources, and
a plan can be thousands of operators deep (a rule body of 5,000 atoms is a chain of 5,000
joins). So no operator calls another's step method. A step that needs its input's answer
*yields* an `Ask` for it and is sent the answer; `Walk` drives the steps with explicit
stacks of generators. The interpreter's stack stays a few frames deep whatever the plan's
depth; the plan's depth costs one suspended generator per operator, on the heap.

A step method (`Node.upquery`, `upquery_grouped`, `upquery_indexed`, `covers_step`,
`Reader.lookup_step`) returns either its answer, when it asks nothing of its inputs (a full
state, a leaf), or an `Upquery` generator that yields and returns its answer. It may yield:

- `Ask`: run that step and send me its answer;
- `Fork` (through `ask_all`): run every one of these steps, as branches of their own, and
  send me their answers in order once all are in. A branch that misses does not stop its
  siblings, so one round names the fetches of every input (both sides of a join, every
  parent of a union);
- `Miss`: the fetch I need is not at hand (a keyed Spark job must run). The walk parks
  that branch and reports the request; the next round sends the step None and it looks
  again (a SourceIndex's fill).

`Walk.advance` runs every branch it can and returns a `WalkResult`: the answer, or the
misses of the round (ReadySet's `ProcessingResult { results, misses }`). The caller gets
the fetches ready (without any lock) and calls `advance` again, which resumes the parked
branches where they stopped: the states that were missing, not the reader. A chain of n
dependent joins thus costs n + 1 rounds and O(n) steps in all.

Rounds are separated by other work on the same dataflow (epochs applied, evictions, other
lookups' fills). A step never keeps a decision across a yield that another walk can undo:
every fill takes only the keys still missing when it fills (another walk may have filled
some meanwhile). But a step does keep the *answers* it was sent, and those describe the
dataflow at the time they were computed. So `advance` takes a `token` that changes whenever
held answers may have gone stale (an epoch applied, any key evicted: `Graph.token`), and
when it changed, each parked branch restarts from the highest frame on its path that holds
an answer of an older token (re-running that step from scratch; its inputs, filled by the
earlier rounds, answer from their states). Frames that hold no answer yet are kept.

Invariants (tests/planner/test_deep_plans.py, tests/planner/test_partial_invariants.py):
the Python stack stays within a constant bound for any plan depth; every state fills
completely in one round or stays untouched; every answer a step combines was computed at
the same token.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Collection, Generator, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from types import GeneratorType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pomoview.dataflow.node import EvictCols, FetchRequest, Node

T = TypeVar("T")

# A step that asks its inputs: yields Asks (or a Fork, or a Miss), is sent each answer,
# returns its own answer.
Upquery = Generator["Ask | Fork | Miss", Any, T]


@dataclass(frozen=True, slots=True)
class Ask:
    """One step to run for a waiting step: `step(*args)`, a node's step method."""

    step: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Fork:
    """Run every ask as a branch of its own; the asker is sent the list of their answers."""

    asks: tuple[Ask, ...]


@dataclass(frozen=True, slots=True)
class Miss:
    """The fetch `request` is not at hand: park this branch until the next round."""

    request: FetchRequest


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


def ask_all(asks: Sequence[Ask]) -> Upquery[list[Any]]:
    """The answers of every one of `asks`, in order, asked side by side (a branch each).
    Use as `answers = yield from ask_all([...])` inside a step."""
    answers: list[Any] = yield Fork(tuple(asks))
    return answers


def all_cover(asks: Iterable[Ask]) -> Upquery[bool]:
    """True when every one of `asks` (each a `covered`) answers True; stops at the first False."""
    for ask in asks:
        if not (yield ask):
            return False
    return True


@dataclass
class WalkResult:
    """One round of a walk: `done` with its `answer`, or the `misses` to fetch first."""

    done: bool
    answer: Any = None
    misses: list[FetchRequest] = field(default_factory=list)
    steps: int = 0  # steps started this round (node visits)


class _Frame:
    """A started step: its generator, and the token of the first answer it was sent."""

    __slots__ = ("ask", "gen", "fed")

    def __init__(self, ask: Ask, gen: Upquery[Any]) -> None:
        self.ask = ask
        self.gen = gen
        self.fed: Hashable | None = None


class _Branch:
    """A stack of frames run depth first. `fork`/`slot`: the fork slot it answers (None for
    the walk's root). `waiting`: the fork its top frame waits on. `start`: the step to start
    before running (a new branch, or a restarted frame)."""

    __slots__ = ("frames", "fork", "slot", "waiting", "start", "send", "missed")

    def __init__(self, start: Ask, fork: _Fork | None = None, slot: int = 0) -> None:
        self.frames: list[_Frame] = []
        self.fork = fork
        self.slot = slot
        self.waiting: _Fork | None = None
        self.start: Ask | None = start
        self.send: Any = None
        self.missed = False


class _Fork:
    """A Fork in progress: its branches and the answers they gave (with the token of the
    first one, which is what the asker will hold)."""

    __slots__ = ("owner", "branches", "answers", "left", "fed")

    def __init__(self, owner: _Branch, size: int) -> None:
        self.owner = owner
        self.branches: list[_Branch] = []
        self.answers: list[Any] = [None] * size
        self.left = size
        self.fed: Hashable | None = None


class Walk:
    """An upquery in rounds; see the module docstring. Not thread-safe: the caller holds the
    dataflow's lock during `advance`, and may drop it between rounds."""

    def __init__(self, first: Ask) -> None:
        self._runnable: list[_Branch] = [_Branch(first)]
        self._parked: list[_Branch] = []
        self._token: Hashable | None = None
        self._done = False
        self._answer: Any = None
        self.steps = 0  # steps started, over every round

    def advance(self, token: Hashable = None) -> WalkResult:
        """Runs every branch that can run; the answer, or the misses of this round."""
        assert not self._done, "advance of a finished walk"
        if self._token is not None and token != self._token:
            self._restart_stale(token)
        self._token = token
        runnable, self._parked = [*self._runnable, *self._parked], []
        self._runnable = []
        for branch in runnable:
            branch.missed = False
        misses: list[FetchRequest] = []
        started = self.steps
        while runnable:
            self._run(runnable.pop(), runnable, misses)
        if self._done:
            return WalkResult(True, self._answer, steps=self.steps - started)
        assert misses, "a walk stopped with neither an answer nor a miss"
        return WalkResult(False, None, list(dict.fromkeys(misses)), self.steps - started)

    def _run(self, branch: _Branch, runnable: list[_Branch], misses: list[FetchRequest]) -> None:
        """Runs `branch` until it finishes (its answer goes to its fork, or is the walk's),
        parks on a Miss, or waits on a Fork."""
        token, frames = self._token, branch.frames
        value, branch.send = branch.send, None
        while True:
            if branch.start is not None:
                ask, branch.start = branch.start, None
                self.steps += 1
                started = ask.step(*ask.args)
                if isinstance(started, GeneratorType):
                    frames.append(_Frame(ask, started))
                    value = None
                else:
                    value = started
                    if not frames:
                        self._finish(branch, value, runnable)
                        return
                    if frames[-1].fed is None:
                        frames[-1].fed = token
            top = frames[-1]
            try:
                yielded = top.gen.send(value)
            except StopIteration as stop:
                frames.pop()
                if not frames:
                    self._finish(branch, stop.value, runnable)
                    return
                value = stop.value
                if frames[-1].fed is None:
                    frames[-1].fed = token
                continue
            value = None
            if isinstance(yielded, Ask):
                branch.start = yielded
            elif isinstance(yielded, Miss):
                branch.missed = True
                self._parked.append(branch)
                misses.append(yielded.request)
                return
            else:
                assert isinstance(yielded, Fork), f"a step yielded {yielded!r}"
                fork = _Fork(branch, len(yielded.asks))
                branch.waiting = fork
                if not yielded.asks:
                    branch.waiting, value = None, []
                    continue
                for slot, ask in enumerate(yielded.asks):
                    child = _Branch(ask, fork, slot)
                    fork.branches.append(child)
                    runnable.append(child)
                return

    def _finish(self, branch: _Branch, value: Any, runnable: list[_Branch]) -> None:
        fork = branch.fork
        if fork is None:
            self._done, self._answer = True, value
            return
        fork.answers[branch.slot] = value
        if fork.fed is None:
            fork.fed = self._token
        fork.left -= 1
        if not fork.left:
            owner = fork.owner
            owner.waiting = None
            owner.send = fork.answers
            if owner.frames[-1].fed is None:
                owner.frames[-1].fed = fork.fed
            runnable.append(owner)

    # -- a new token: answers held across rounds may be stale ------------------------------

    def _restart_stale(self, token: Hashable) -> None:
        """Restarts each parked branch's path at its highest frame (or fork) holding an
        answer of an older token; drops every branch below a restarted frame."""
        dropped: set[int] = set()
        keep: list[_Branch] = []
        for leaf in self._parked:
            if id(leaf) in dropped:
                continue
            path = self._path(leaf)
            restarted = False
            for branch in path:
                index = self._stale_index(branch, token)
                if index is not None:
                    self._restart(branch, index, dropped)
                    keep.append(branch)
                    restarted = True
                    break
            if not restarted:
                keep.append(leaf)
        self._parked = [b for b in dict.fromkeys(keep) if id(b) not in dropped]

    @staticmethod
    def _path(leaf: _Branch) -> list[_Branch]:
        """The branches from the walk's root down to `leaf`."""
        path = [leaf]
        while path[-1].fork is not None:
            path.append(path[-1].fork.owner)  # type: ignore[union-attr]
        path.reverse()
        return path

    @staticmethod
    def _stale_index(branch: _Branch, token: Hashable) -> int | None:
        """The index of the first frame of `branch` holding an answer of another token
        (its top frame counts the answers its fork already holds)."""
        for index, frame in enumerate(branch.frames):
            if frame.fed is not None and frame.fed != token:
                return index
        fork = branch.waiting
        if fork is not None and fork.fed is not None and fork.fed != token and branch.frames:
            return len(branch.frames) - 1
        return None

    def _restart(self, branch: _Branch, index: int, dropped: set[int]) -> None:
        """Drops the frames of `branch` from `index` up (and every branch below them), and
        starts that frame's step again."""
        stack = [branch.waiting] if branch.waiting is not None else []
        while stack:
            fork = stack.pop()
            for child in fork.branches:  # type: ignore[union-attr]
                dropped.add(id(child))
                if child.waiting is not None:
                    stack.append(child.waiting)
                for frame in child.frames:
                    frame.gen.close()
        for frame in branch.frames[index:]:
            frame.gen.close()
        ask = branch.frames[index].ask
        del branch.frames[index:]
        branch.waiting, branch.send, branch.start = None, None, ask


def pull_in_step(first: Ask) -> Any | None:
    """The answer of `first` from what the states hold, or None when it would need a fetch:
    for an operator that pulls from its input during a step (TopK's refill). The states above
    have applied the step already, so their answers are the step's; a source index never
    fetches here (a fetch answers at another epoch than the step's) but reports a miss, and a
    walk that misses changes no state."""
    _local.no_fetch = True
    try:
        result = Walk(first).advance()
    finally:
        _local.no_fetch = False
    return result.answer if result.done else None


def fetches_allowed() -> bool:
    """False during `pull_in_step`: a source index must not fetch then."""
    return not getattr(_local, "no_fetch", False)


def run(first: Ask) -> Any:
    """The answer of `first` in one round: for walks that cannot miss (full states, a fetch
    that always answers, `covers`). A miss here is a bug."""
    result = Walk(first).advance()
    if not result.done:
        raise AssertionError(f"a walk that cannot miss missed: {result.misses}")
    return result.answer


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
