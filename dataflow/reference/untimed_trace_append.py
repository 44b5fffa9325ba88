"""UntimedTraceAppend (PomoFlow §2.9.17): a trace of every delta its input has carried, without times.

An untimed trace is a `Trace` whose deltas all share the single time
`UNTIMED = (0,)`: appending a ZSet adds its weights to the ones already there,
so each (key, value) holds exactly one entry, its running sum, and the trace
is the integral of its input. Read it with `consolidate`, `values` or
`weight(key, value)` without `upto`; comparing its time with the times of a
circuit (`upto=`, `Z1Trace`) is meaningless, since every entry claims (0,).
Only the sum of history matters at the root, which is where DistinctIncremental
(§2.9.18) wants it.

Contract: not linear (its output is all of history). State: the trace, which
it owns (like TraceAppend); at every time it appends the input's delta, if
any, and emits the trace, so it runs at every time. The trace is full and
never compacted (one time has nothing to fold). In a root circuit it hydrates
from the input's whole output. Not queryable: read the trace (Consolidate
does).
"""

from __future__ import annotations

from typing import Any

from pomoview.dataflow.operators.trace_append import TraceAppend
from pomoview.dataflow.time import Time
from pomoview.dataflow.trace import Trace
from pomoview.dataflow.zset import IndexedZSet, ZSet

UNTIMED: Time = (0,)


def untimed_trace_append(batch: ZSet[Any] | IndexedZSet[Any, Any], trace: Trace) -> Trace:
    """Adds `batch` to `trace` at the one time of an untimed trace; returns the same trace."""
    trace.append(batch, UNTIMED)
    return trace


class UntimedTraceAppend(TraceAppend):
    untimed = UNTIMED
