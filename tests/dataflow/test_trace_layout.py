"""The compact layout of a Trace (settled codes at the floor, recent codes the epoch after it)
against a plain model, and the operators' direct reads of it (`nested_layout`) against their
general paths, which read dicts of times."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pomoview.dataflow.operators.distinct_trace import DistinctTrace
from pomoview.dataflow.operators.input import Input
from pomoview.dataflow.operators.join_trace import JoinTrace
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import Trace, TraceBefore, nested_layout
from pomoview.dataflow.trace_codes import code_size, decode, encode, merge_codes
from pomoview.dataflow.zset import IndexedZSet, ZSet

SETTINGS = settings(max_examples=200, deadline=None)

# Operations on a trace of times `depth` long: ("advance", step) moves the epoch on by step;
# ("insert", key, value, epoch offset, inner, weight) writes at the epoch plus the offset
# (a negative offset lands below the floor, where it folds); ("append", batch, indexed, inner)
# appends a ZSet or an IndexedZSet at the current epoch.
KEYS = st.integers(0, 3)
VALUES = st.sampled_from([None, "a", "b"])
WEIGHTS = st.integers(-2, 2)


def operations(depth: int) -> st.SearchStrategy[list[tuple]]:
    inner = st.tuples(*[st.integers(0, 3)] * (depth - 1))
    return st.lists(
        st.one_of(
            st.tuples(st.just("advance"), st.integers(0, 2)),
            st.tuples(st.just("insert"), KEYS, VALUES, st.integers(-3, 1), inner, WEIGHTS),
            st.tuples(
                st.just("append"),
                st.lists(st.tuples(KEYS, VALUES, WEIGHTS), max_size=6),
                st.booleans(),
                inner,
            ),
        ),
        max_size=40,
    )


def folded(model: dict[tuple[Hashable, Hashable, Time], int], epoch: int) -> dict[tuple, int]:
    """The model with every time below the floor folded onto it, zeros dropped."""
    out: dict[tuple, int] = {}
    for (key, value, time), weight in model.items():
        if time[0] < epoch - 1:
            time = (epoch - 1,) + time[1:]
        out[(key, value, time)] = out.get((key, value, time), 0) + weight
    return {k: w for k, w in out.items() if w}


def check_against(trace: Trace, want: dict[tuple, int], depth: int) -> None:
    assert sorted(trace.cursor(), key=repr) == sorted(
        ((k, v, t, w) for (k, v, t), w in want.items()), key=repr
    )
    assert len(trace) == len(want)
    assert set(trace.keys()) == {k for k, _, _ in want} and trace.present_keys() == len(set(trace.keys()))
    for key, value in itertools.product(range(4), [None, "a", "b"]):
        times = {t: w for (k, v, t), w in want.items() if (k, v) == (key, value)}
        assert trace.times(key, value) == times
        # The parts: settled codes at the floor, recent codes at the epoch after it, later
        # times above that; never two at one time, and no zero weight kept.
        code, recent_code = trace.settled_code(key, value), trace.recent_code(key, value)
        settled = {} if code is None else {(trace.floor,) + i: w for i, w in decode(code, depth)}
        at = (trace.floor + 1,)
        recent = {} if recent_code is None else {at + i: w for i, w in decode(recent_code, depth)}
        later = trace.later_times(key, value)
        assert {**settled, **recent, **later} == times
        assert len(settled) + len(recent) + len(later) == len(times)
        assert trace.recent_epoch == trace.floor + 1 and all(t[0] > trace.recent_epoch for t in later)
        assert all(w for w in (*settled.values(), *recent.values(), *later.values()))
        assert trace.settled_values(key).get(value) == code
        assert trace.recent_values(key).get(value) == recent_code
        if value is None:
            ((_, history_code, history_recent),) = trace.histories([key])
            assert history_code == code and history_recent == recent_code
    assert trace.writes_ahead() == any(t[0] > trace.recent_epoch for _, _, t in want)
    parts = (trace.floor.__ge__, trace.recent_epoch.__eq__, trace.recent_epoch.__lt__)
    assert trace.entries_by_part() == tuple(sum(1 for _, _, t in want if part(t[0])) for part in parts)
    assert trace.estimate_bytes() > 0


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 3]))
def test_layout_matches_a_plain_model(data: st.DataObject, depth: int) -> None:
    ops = data.draw(operations(depth))
    trace = Trace()
    model: dict[tuple[Hashable, Hashable, Time], int] = {}
    epoch = 0
    for op in ops:
        if op[0] == "advance":
            epoch += op[1]
            trace.advance_to(epoch)
        elif op[0] == "insert":
            _, key, value, offset, inner, weight = op
            time = (max(0, epoch + offset),) + inner
            assert trace.insert(key, value, time, weight)
            model[(key, value, time)] = model.get((key, value, time), 0) + weight
        else:
            _, rows, indexed, inner = op
            time = (epoch,) + inner
            batch: ZSet[Hashable] | IndexedZSet[Hashable, Hashable]
            if indexed:
                batch = IndexedZSet()
                for key, value, weight in rows:
                    batch.add(key, value, weight)
            else:  # a plain ZSet: its elements are the keys, the value None
                batch = ZSet()
                for key, _, weight in rows:
                    batch.add(key, weight)
            trace.append(batch, time)
            for (key, value), weight in _weights(batch):
                model[(key, value, time)] = model.get((key, value, time), 0) + weight
        check_against(trace, folded(model, epoch), depth)


def _weights(batch: ZSet[Hashable] | IndexedZSet[Hashable, Hashable]) -> list[tuple[tuple, int]]:
    if isinstance(batch, IndexedZSet):
        return [((key, value), w) for key, group in batch.groups() for value, w in group.items()]
    return [((key, None), w) for key, w in batch.items()]


@SETTINGS
@given(
    st.dictionaries(st.tuples(st.integers(0, 4), st.integers(0, 4)), WEIGHTS, max_size=5),
    st.sampled_from([1, 2, 3]),
)
def test_codes_round_trip(entries: dict[tuple[int, int], int], depth: int) -> None:
    entries_of_depth = {inner[: depth - 1]: 0 for inner in entries}
    for inner, weight in entries.items():
        entries_of_depth[inner[: depth - 1]] += weight
    live = {inner: w for inner, w in entries_of_depth.items() if w}
    code = encode(entries_of_depth, depth)
    if not live:
        assert code is None
        return
    assert code is not None
    assert dict(decode(code, depth)) == live and code_size(code, depth) == len(live)
    assert (type(code) is int) == (depth == 2 and list(live.values()) == [1])


ENTRIES = st.dictionaries(st.integers(0, 4), st.integers(-2, 2).filter(bool), min_size=1, max_size=4)


@SETTINGS
@given(ENTRIES, ENTRIES)
def test_merged_codes_sum_their_entries(a: dict[int, int], b: dict[int, int]) -> None:
    """Two codes of (iteration, weight) entries merge into the code of their sums, whether b's
    iterations all follow a's (an epoch's entries arriving in order: appended) or not."""
    code_a, code_b = encode({(i,): w for i, w in a.items()}, 2), encode({(i,): w for i, w in b.items()}, 2)
    assert code_a is not None and code_b is not None
    sums = {(i,): a.get(i, 0) + b.get(i, 0) for i in a.keys() | b.keys()}
    assert merge_codes(code_a, code_b, 2) == encode(sums, 2)


def test_settling_sums_a_values_times_at_one_iteration() -> None:
    """Times of two epochs at one iteration, both recent when the floor passes them, settle
    as one entry: weight 2 (not the int code of weight 1), 2, or nothing when they cancel."""
    trace = Trace()
    for key, value, weights in (("k", None, (1, 1)), ("j", "a", (3, -1)), ("c", None, (1, -1))):
        trace.insert(key, value, (0, 1), weights[0])
        trace.insert(key, value, (1, 1), weights[1])
    trace.advance_to(2)
    assert trace.settled_code("k") == (1, 2) and trace.times("k") == {(1, 1): 2}
    assert trace.settled_code("j", "a") == (1, 2) and trace.times("j", "a") == {(1, 1): 2}
    assert trace.times("c") == {} and set(trace.keys()) == {"k", "j"} and len(trace) == 2


# -- the operators' direct reads against their general paths ---------------------------------------

# (key, epochs before the last, iteration, weight): few keys and iterations, so that one key's
# history often holds settled and recent entries at, below and above the operator's iteration.
HISTORY = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 2), st.integers(-2, 2)), max_size=25
)
OPERATOR_SETTINGS = settings(max_examples=500, deadline=None)


def nested_trace(history: list[tuple[int, int, int, int]], epoch: int, settle: bool) -> Trace:
    """A trace of (epoch, iteration) times written epoch by epoch up to `epoch`, of keys
    0..3 with the value None; `settle` advances it past its last epoch, as a Child does."""
    trace = Trace()
    for e in range(epoch + 1):
        trace.advance_to(e)
        for key, offset, iteration, weight in history:
            if e == epoch - offset:
                trace.insert(key, None, (e, iteration), weight)
    if settle:
        trace.advance_to(epoch + 1)
    return trace


@OPERATOR_SETTINGS
@given(
    HISTORY, st.integers(0, 3), st.booleans(), st.integers(0, 3), st.dictionaries(st.integers(0, 3), WEIGHTS)
)
# A settled entry at the operator's iteration and a recent one below it: the four corners differ.
@example([(0, 1, 1, 1), (0, 0, 0, 1)], 1, False, 1, {})
def test_distinct_reads_the_layout_as_the_general_path_reads_times(
    history: list, epoch: int, settle: bool, iteration: int, delta: dict[int, int]
) -> None:
    trace = nested_trace(history, epoch, settle)
    time = (epoch + 1 if settle else epoch, iteration)
    before = TraceBefore(trace, time)
    layout = nested_layout(before, time)
    assert layout is not None
    weights = {k: w for k, w in delta.items() if w}
    candidates = set(range(4))
    direct, general = (
        DistinctTrace(Input("a", ("x",)), Input("t", ())),
        DistinctTrace(Input("a", ("x",)), Input("t", ())),
    )
    got = direct._nested(set(candidates), weights, layout[0], layout[1], time)
    want = general._general(set(candidates), weights, before, time)
    assert got == want
    assert direct.scheduled == general.scheduled


@OPERATOR_SETTINGS
@given(
    HISTORY,
    st.integers(0, 3),
    st.booleans(),
    st.integers(0, 4),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2), WEIGHTS)),
)
def test_join_reads_the_layout_as_the_general_path_reads_times(
    history: list, epoch: int, settle: bool, iteration: int, rows: list[tuple[int, int, int]]
) -> None:
    trace = Trace()
    for e in range(epoch + 1):  # values (key, n) under each key, so that a key holds several
        trace.advance_to(e)
        for n, (key, offset, i, weight) in enumerate(history):
            if e == epoch - offset:
                trace.insert(key, (key, n % 3), (e, i), weight)
    if settle:
        trace.advance_to(epoch + 1)
    time = (epoch + 1 if settle else epoch, iteration)
    before = TraceBefore(trace, time)
    layout = nested_layout(before, time)
    assert layout is not None
    delta: IndexedZSet[Hashable, Hashable] = IndexedZSet()
    for key, value, weight in rows:
        delta.add(key, value, weight)

    def join_fn(key: Hashable, v1: Hashable, v2: Hashable) -> Hashable:
        return (key, v1, v2)

    direct = JoinTrace(Input("a", ()), Input("t", ()), join_fn)
    general = JoinTrace(Input("a", ()), Input("t", ()), join_fn)
    got: dict[Hashable, int] = {}
    want: dict[Hashable, int] = {}
    direct._nested(delta, layout[0], layout[1], time, got)
    general._general(delta, before, time, want)
    assert {r: w for r, w in got.items() if w} == {r: w for r, w in want.items() if w}
    assert {at: {r: w for r, w in due.items() if w} for at, due in direct.due.items()} == {
        at: {r: w for r, w in due.items() if w} for at, due in general.due.items()
    }
