"""Timestamps (PomoFlow §2.5) and traces (§2.3): product order, lattice operations,
validation, Möbius corners, partial traces, compaction and TraceBefore."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.dataflow.time import advance, corners, glb, leq, lt, lub, validate
from pomoview.dataflow.trace import Trace, TraceBefore

SETTINGS = settings(max_examples=150, deadline=None)

# -- time ----------------------------------------------------------------------------------------


def test_product_order_examples_of_the_spec() -> None:
    # "(0, 0) <= (0, 1) <= (1, 1), but neither (0, 2) <= (1, 1) or (1, 1) <= (2, 0)"
    assert leq((0, 0), (0, 1)) and leq((0, 1), (1, 1)) and leq((0, 0), (1, 1))
    assert not leq((0, 2), (1, 1)) and not leq((1, 1), (0, 2))  # incomparable
    assert not leq((1, 1), (2, 0)) and not leq((2, 0), (1, 1))  # incomparable
    assert leq((1, 1), (1, 1)) and not lt((1, 1), (1, 1))
    assert lt((0, 1), (1, 1)) and not lt((1, 1), (0, 1))


def test_root_times_are_totally_ordered() -> None:
    assert leq((0,), (3,)) and not leq((3,), (0,))


def test_lub_and_glb() -> None:
    assert lub((0, 2), (1, 1)) == (1, 2)
    assert glb((0, 2), (1, 1)) == (0, 1)
    assert lub((1, 1), (2, 0)) == (2, 1)
    assert glb((1, 1), (2, 0)) == (1, 0)
    assert lub((3,), (5,)) == (5,) and glb((3,), (5,)) == (3,)


TIMES2 = st.tuples(st.integers(0, 4), st.integers(0, 4))


@SETTINGS
@given(TIMES2, TIMES2, TIMES2)
def test_lub_and_glb_are_the_bounds(s: tuple, t: tuple, u: tuple) -> None:
    j, m = lub(s, t), glb(s, t)
    assert leq(s, j) and leq(t, j) and leq(m, s) and leq(m, t)
    # least / greatest: any other bound is above / below
    if leq(s, u) and leq(t, u):
        assert leq(j, u)
    if leq(u, s) and leq(u, t):
        assert leq(u, m)
    assert leq(s, t) == (lub(s, t) == t) == (glb(s, t) == s)


def test_validate() -> None:
    assert validate((0,)) == (0,)
    assert validate((3, 0, 7)) == (3, 0, 7)
    for bad in [(), (-1,), (0, -1), (1.0,), ("0",), (True,), (None,)]:
        with pytest.raises(ValueError):
            validate(bad)  # type: ignore[arg-type]


def test_corners() -> None:
    assert dict(corners((1, 1))) == {(1, 1): 1, (0, 1): -1, (1, 0): -1, (0, 0): 1}
    assert dict(corners((0, 1))) == {(0, 1): 1, (0, 0): -1}  # (0 - 1, ...) is "before the beginning"
    assert dict(corners((2, 0))) == {(2, 0): 1, (1, 0): -1}
    assert dict(corners((0, 0))) == {(0, 0): 1}
    assert dict(corners((5,))) == {(5,): 1, (4,): -1}
    assert dict(corners((1, 1, 1))) == {
        (1, 1, 1): 1,
        (0, 1, 1): -1,
        (1, 0, 1): -1,
        (1, 1, 0): -1,
        (0, 0, 1): 1,
        (0, 1, 0): 1,
        (1, 0, 0): 1,
        (0, 0, 0): -1,
    }


@SETTINGS
@given(st.dictionaries(TIMES2, st.integers(-3, 3)))
def test_corners_invert_the_prefix_sum(f: dict) -> None:
    """The delta of f at t is the Möbius inversion over corners; summing deltas <= t gives f(t) back."""

    def value(t: tuple) -> int:
        return f.get(t, 0)

    def delta(t: tuple) -> int:
        return sum(sign * value(c) for c, sign in corners(t))

    for t in itertools.product(range(5), repeat=2):
        assert sum(delta(s) for s in itertools.product(range(5), repeat=2) if leq(s, t)) == value(t)


def test_advance() -> None:
    assert advance((0, 3), 2) == (1, 3)
    assert advance((1, 3), 2) == (1, 3)
    assert advance((2, 0), 2) == (2, 0)
    assert advance((5,), 0) == (5,)
    assert advance((0,), 1) == (0,)
    assert advance((0,), 3) == (2,)


# -- partial traces --------------------------------------------------------------------------------


def test_full_trace_answers_empty_for_an_unknown_key() -> None:
    trace = Trace()
    assert trace.values("k") == {}
    assert trace.is_present("k") and trace.missing(["k"]) == []
    assert trace.insert("k", None, (0,), 1)
    assert trace.values("k") == {None: {(0,): 1}}


def test_partial_trace_missing_vs_present_empty() -> None:
    trace = Trace(partial=True)
    assert trace.values("k") is None  # missing
    assert not trace.is_present("k")
    assert trace.missing(["k", "j", "k"]) == ["k", "j"]
    trace.fill("k", [])
    assert trace.values("k") == {}  # present, empty
    assert trace.is_present("k") and trace.missing(["k", "j"]) == ["j"]
    assert trace.present_keys() == 1
    # a present key stays present when its entries cancel out
    assert trace.insert("k", "v", (0,), 2)
    assert trace.insert("k", "v", (0,), -2)
    assert trace.values("k") == {} and trace.is_present("k")


def test_partial_trace_fill_keeps_its_entries() -> None:
    trace = Trace(partial=True)
    trace.fill("k", [("v", (0, 1), 2), ("v", (0, 1), 1), ("w", (1, 0), -1)])
    assert trace.values("k") == {"v": {(0, 1): 3}, "w": {(1, 0): -1}}
    assert trace.weight("k", "v") == 3 and trace.weight("k", "v", upto=(0, 0)) == 0
    assert len(trace) == 2


def test_fill_asserts_on_a_present_key() -> None:
    trace = Trace(partial=True)
    trace.fill("k", [("v", (0,), 1)])
    with pytest.raises(AssertionError):
        trace.fill("k", [])
    assert trace.values("k") == {"v": {(0,): 1}}  # unchanged
    with pytest.raises(AssertionError):
        Trace().fill("k", [])  # a full trace has no missing key to fill


def test_insert_into_a_missing_key_is_refused() -> None:
    trace = Trace(partial=True)
    trace.fill("j", [("v", (0,), 1)])
    before = list(trace.cursor())
    assert trace.insert("k", "v", (0,), 1) is False
    assert trace.values("k") is None
    assert list(trace.cursor()) == before and len(trace) == 1 and list(trace.keys()) == ["j"]


# -- compaction ------------------------------------------------------------------------------------

# An epoch-ordered write sequence: (epoch step, key, value, iteration, weight). Epochs only
# grow, as in a circuit; inside an epoch iterations may come in any order.
OPS = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 1), st.integers(0, 3), st.integers(-2, 2)),
    max_size=30,
)


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "root"])
@SETTINGS
@given(ops=OPS)
def test_compaction_keeps_every_weight_it_can_still_be_asked(nested: bool, ops: list) -> None:
    compacted = Trace()
    reference = Trace()  # never advanced: every time kept as written
    epoch = 0
    for step, key, value, iteration, weight in ops:
        epoch += step
        time = (epoch, iteration) if nested else (epoch,)
        compacted.advance_to(epoch)
        compacted.insert(key, value, time, weight)
        reference.insert(key, value, time, weight)
        # every time still askable: epochs >= epoch - 1 (and up to one past the present)
        uptos = [
            (e, i) if nested else (e,)
            for e in range(max(epoch - 1, 0), epoch + 2)
            for i in (range(5) if nested else [0])
        ]
        for k in range(3):
            for v in range(2):
                for upto in uptos:
                    assert compacted.weight(k, v, upto) == reference.weight(k, v, upto), (k, v, upto)
                assert compacted.weight(k, v) == reference.weight(k, v)
        assert compacted.consolidate() == reference.consolidate()
        # entries of epochs < epoch - 1 are folded onto epoch - 1
        entries = list(compacted.cursor())
        assert all(t[0] >= epoch - 1 for _, _, t, _ in entries), entries
        assert len(compacted) == len(entries) <= len(list(reference.cursor()))
        walk = [(k, v, t) for k, v, t, _ in entries]
        assert walk == sorted(walk) and all(w != 0 for *_, w in entries)


def test_compaction_folds_and_cancels() -> None:
    trace = Trace()
    trace.insert("k", None, (0, 1), 1)
    trace.insert("k", None, (1, 1), 2)
    trace.insert("k", None, (1, 2), 5)
    trace.insert("j", None, (0, 0), 1)
    trace.insert("j", None, (1, 0), -1)
    trace.advance_to(3)  # epochs 0 and 1 fold onto 2
    assert list(trace.cursor()) == [("k", None, (2, 1), 3), ("k", None, (2, 2), 5)]
    assert len(trace) == 2
    assert trace.weight("j", None) == 0


def test_advance_to_never_goes_back() -> None:
    trace = Trace()
    trace.advance_to(2)
    with pytest.raises(AssertionError):
        trace.advance_to(1)


# -- TraceBefore ----------------------------------------------------------------------------------

ENTRIES = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 1), TIMES2, st.integers(-2, 2)),
    max_size=20,
)


@SETTINGS
@given(ENTRIES, TIMES2)
def test_trace_before_hides_exactly_the_entries_at_its_time(entries: list, time: tuple) -> None:
    trace = Trace()
    for key, value, t, weight in entries:
        trace.insert(key, value, t, weight)
    before = TraceBefore(trace, time)
    all_entries = list(trace.cursor())
    assert list(before.cursor()) == [e for e in all_entries if e[2] != time]
    for key in range(3):
        for value in range(2):
            times = trace.times(key, value)
            assert before.times(key, value) == {t: w for t, w in times.items() if t != time}
            for upto in itertools.product(range(4), repeat=2):
                hidden = times.get(time, 0) if leq(time, upto) else 0
                assert before.weight(key, value, upto) == trace.weight(key, value, upto) - hidden
        want = {v: ts for v, ts in ((v, before.times(key, v)) for v in range(2)) if ts}
        assert before.values(key) == want
    # the trace itself is untouched
    assert list(trace.cursor()) == all_entries


def test_trace_before_of_a_partial_trace_keeps_missing_keys_missing() -> None:
    trace = Trace(partial=True)
    trace.fill("k", [("v", (0, 0), 1), ("v", (0, 1), 1)])
    before = TraceBefore(trace, (0, 1))
    assert before.values("j") is None
    assert before.values("k") == {"v": {(0, 0): 1}}
    trace.fill("e", [])
    assert before.values("e") == {}


def _exact_bytes(trace: Trace) -> int:
    """Every key, value, code and time sized, as `estimate_bytes` does for the ones it samples."""
    import sys

    def deep(v: object) -> int:
        if type(v) is int and -5 <= v <= 256:
            return 0
        return sys.getsizeof(v) + (sum(sys.getsizeof(x) for x in v) if type(v) is tuple else 0)

    total = sum(map(sys.getsizeof, (trace._settled, trace._recent, trace._later, trace._present)))
    for part in (trace._settled, trace._recent):  # key -> value -> code, or key -> code
        for key, held in part.items():
            total += deep(key)
            if type(held) is dict:
                total += sys.getsizeof(held) + sum(deep(value) + deep(code) for value, code in held.items())
            else:
                total += deep(held)
    for key, values in trace._later.items():  # key -> value -> time -> weight
        total += deep(key) + sys.getsizeof(values)
        for value, times in values.items():
            total += deep(value) + sys.getsizeof(times) + sum(deep(t) for t in times)
    return total


@pytest.mark.parametrize("settled", [False, True], ids=["recent", "settled"])
@pytest.mark.parametrize("shape", ["uniform", "one-wide-key"])
def test_estimate_bytes_samples_keys_and_values_and_is_close(shape: str, settled: bool) -> None:
    """A closure's trace: a few keys with thousands of values each, or one key with most of
    them. The estimate, from 64 keys and 8 values of each, is within 25% of every entry
    sized."""
    trace = Trace()
    widths = [2000] * 100 if shape == "uniform" else [20_000] + [3] * 200
    for k, width in enumerate(widths):
        for v in range(width):
            trace.insert((k,), (k, v), (0, v % 3), 1)
            if v % 5 == 0:
                trace.insert((k,), (k, v), (1, 0), -1)
    if settled:
        trace.advance_to(3)
    exact = _exact_bytes(trace)
    assert abs(trace.estimate_bytes() - exact) <= 0.25 * exact, (trace.estimate_bytes(), exact)


def test_a_traces_parts_stay_tracked_through_full_collections() -> None:
    """A closure-sized part untracked by a full collection would be tracked again, young, by
    its next new entry, and walked whole by the next two young collections (trace.Part)."""
    import gc

    trace = Trace()
    for i in range(1000):
        trace.insert((i, i + 1), None, (0, i % 3), 1)
    trace.advance_to(1)
    trace.insert((5, 7), None, (1, 2), 1)
    plain = dict(trace._settled)
    gc.collect()  # every key and code is untracked now, and so is an exact dict of them
    assert not gc.is_tracked(plain)
    assert gc.is_tracked(trace._settled) and gc.is_tracked(trace._recent)
