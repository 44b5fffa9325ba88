"""bench/hits_under_load.py's figures and table: the busy phase's figures from the busy load's
logs (the writer's acknowledgments, the stats sampler's epochs and lags, the subscription's
changes, the cold misses), the subscription's folded counts against the writer's log, and the
table printed at the end."""

from __future__ import annotations

import argparse
import bisect
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import busy_load  # noqa: E402
from vote import pct  # noqa: E402

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
SUBSCRIBED = list(range(1, 11))


# -- the busy phase's figures ---------------------------------------------------------------


class WriterLog:
    """The busy writer's (epoch, votes, acknowledged at) in epoch order, and the votes written
    up to an epoch."""

    def __init__(self, writes: list[tuple[int, int, float, float]]) -> None:
        writes = sorted(writes)
        self.epochs = [w[0] for w in writes]
        self.acked = [w[2] for w in writes]
        self.latency = [w[3] for w in writes]
        self.cumulative = np.cumsum([w[1] for w in writes]).tolist()
        self.ack_of = dict(zip(self.epochs, self.acked, strict=True))

    def votes_up_to(self, epoch: int) -> int:
        i = bisect.bisect_right(self.epochs, epoch)
        return int(self.cumulative[i - 1]) if i else 0

    def oldest_unapplied_age(self, at: float, applied: int) -> float:
        """Seconds since the oldest write acknowledged by `at` and above `applied` was acked."""
        i = bisect.bisect_right(self.epochs, applied)
        return at - self.acked[i] if i < len(self.epochs) and self.acked[i] <= at else 0.0


def busy_figures(logs: busy_load.Logs, span: tuple[float, float]) -> dict[str, Any]:
    log = WriterLog(logs.writes)
    start, end = span
    acked = [v for (_, v, at, _) in logs.writes if start <= at <= end]
    samples = [s for s in logs.samples if start <= s[0] <= end]
    out: dict[str, Any] = {"batches": len(logs.writes), "span_s": end - start}
    out["acked_votes_per_s"] = sum(acked) / (end - start)
    if len(samples) >= 2:
        (t0, a0, *_), (t1, a1, *_) = samples[0], samples[-1]
        out["applied_votes_per_s"] = (log.votes_up_to(a1) - log.votes_up_to(a0)) / (t1 - t0)
    else:
        out["applied_votes_per_s"] = 0.0
    lag_epochs = [float(d - a) for _, a, d, *_ in samples]
    # Client-side: the sample is dated at the call's start (Stats reads the epochs first).
    lag_s = [log.oldest_unapplied_age(t, a) for t, a, *_ in samples]
    server_lag = [lag for *_, lag in samples]  # the server's, at the instant it read the epochs
    stats_s = [s for *_, s, _ in samples]
    out["stats_call"] = {
        "p50": pct(stats_s, 0.5) if samples else 0.0,
        "p99": pct(stats_s, 0.99) if samples else 0.0,
    }
    out["samples"] = len(samples)
    out["lag_epochs"] = {q: pct(lag_epochs, f) if samples else 0.0 for q, f in (("p50", 0.5), ("p99", 0.99))}
    quantiles = (("p50", 0.5), ("p99", 0.99))
    out["lag_s"] = {q: pct(lag_s, f) if samples else 0.0 for q, f in quantiles}
    out["lag_s_max"] = max(lag_s, default=0.0)
    out["server_lag_s"] = {q: pct(server_lag, f) if samples else 0.0 for q, f in quantiles}
    # Is the backlog growing? The lag in epochs over the first and last fifths of the span.
    fifth = max(1, len(lag_epochs) // 5)
    out["lag_epochs_first_last"] = (
        statistics.mean(lag_epochs[:fifth]) if lag_epochs else 0.0,
        statistics.mean(lag_epochs[-fifth:]) if lag_epochs else 0.0,
    )
    ack = [x for x, at in zip(log.latency, log.acked, strict=True) if start <= at <= end]
    out["ack"] = {q: pct(ack, f) if ack else 0.0 for q, f in (("p50", 0.5), ("p99", 0.99))}
    sub = [
        arrived - log.ack_of[e] for e, arrived in logs.changes if e in log.ack_of and start <= arrived <= end
    ]
    out["subscription"] = {
        "changes": len(sub),
        "changes_total": len(logs.changes),
        "unmatched": sum(1 for e, _ in logs.changes if e not in log.ack_of),
        "early": sum(1 for x in sub if x < 0),  # arrived before the writer saw its ack
        "p50": pct(sub, 0.5) if sub else 0.0,
        "p99": pct(sub, 0.99) if sub else 0.0,
    }
    cold = [dt for (_, at, dt) in logs.cold if start <= at <= end]
    out["cold"] = {
        "misses": len(cold),
        "misses_total": len(logs.cold),
        "p50": pct(cold, 0.5) if cold else 0.0,
        "p99": pct(cold, 0.99) if cold else 0.0,
    }
    return out


def subscription_mismatches(logs: busy_load.Logs, loaded: np.ndarray) -> list[str]:
    """The subscription's snapshot with its changes folded in, against the loaded votes and
    the writer's batches up to the last change's epoch."""
    last = max([e for e, _ in logs.changes], default=logs.snapshot_epoch)
    top = max(SUBSCRIBED)
    expected = loaded[: top + 1].astype(np.int64).copy()
    for (epoch, _, _, _), hot in zip(logs.writes, logs.hot, strict=True):
        if epoch <= last:
            expected += hot
    return [
        f"id {k}: subscription {logs.subscribed_votes.get(k)} != {int(expected[k])} at epoch {last}"
        for k in SUBSCRIBED
        if logs.subscribed_votes.get(k) != int(expected[k])
    ]


# -- the table --------------------------------------------------------------------------------


def print_table(out: dict[str, Any], args: argparse.Namespace) -> None:
    def ms(x: float) -> str:
        return f"{x * 1e3:.2f}"

    def quantiles(r: dict[str, float]) -> str:
        return " / ".join(ms(r[q]) for q in QUANTILES)

    rows: list[tuple[str, str, str, str]] = []
    phases = [
        ("idle client", "idle, 1 key/RPC, Client.lookup", "echo"),
        ("idle stub", "idle, 1 key/RPC, raw stub", "echo"),
        ("busy client", "busy, 1 key/RPC, Client.lookup", "echo"),
        ("busy stub", "busy, 1 key/RPC, raw stub", "echo"),
        ("batched", "at rest, 100 keys/RPC, lookup_many", "typed floor"),
    ]
    for key, label, peer in phases:
        a, b = out["reads"][key]["pomoview"], out["reads"][key][peer]
        errors = int(a["errors"] + b["errors"])
        rows.append(
            (
                f"{label} vs {peer}: keys/s" + (f" ({errors} errors)" if errors else ""),
                f"{a['keys_per_s']:,.0f}",
                f"{b['keys_per_s']:,.0f}",
                f"{a['keys_per_s'] / b['keys_per_s']:.2f}x" if b["keys_per_s"] else "",
            )
        )
        rows.append(
            (
                f"  p50 / p90 / p99 / p999 ms ({a['rpcs']:,.0f} / {b['rpcs']:,.0f} RPCs per window)",
                quantiles(a),
                quantiles(b),
                " / ".join(f"{a[q] / b[q]:.2f}" if b[q] else "-" for q in QUANTILES) + "x",
            )
        )
    busy = out["busy"]
    sub, cold = busy["subscription"], busy["cold"]
    first, last = busy["lag_epochs_first_last"]
    rows += [
        (
            "busy: votes/s acknowledged / applied (applied_epoch via the writer's log)",
            f"{busy['acked_votes_per_s']:,.0f} / {busy['applied_votes_per_s']:,.0f}",
            "",
            f"applied/acked {busy['applied_votes_per_s'] / max(1.0, busy['acked_votes_per_s']):.2f}",
        ),
        (
            f"busy: write ack p50 / p99 ms ({busy['batches']:,} batches of {args.batch:,})",
            f"{ms(busy['ack']['p50'])} / {ms(busy['ack']['p99'])}",
            "",
            "",
        ),
        (
            "busy: apply lag p50 / p99, epochs (durable - applied)",
            f"{busy['lag_epochs']['p50']:.0f} / {busy['lag_epochs']['p99']:.0f}",
            "",
            f"mean first/last fifth {first:.1f} / {last:.1f}",
        ),
        (
            "busy: apply lag p50 / p99 ms (oldest acked unapplied, at the call's start)",
            f"{ms(busy['lag_s']['p50'])} / {ms(busy['lag_s']['p99'])}",
            "",
            f"max {ms(busy['lag_s_max'])} ms, {busy['samples']} samples",
        ),
        (
            "busy: apply lag p50 / p99 ms (the server's apply_lag_seconds)",
            f"{ms(busy['server_lag_s']['p50'])} / {ms(busy['server_lag_s']['p99'])}",
            "",
            "",
        ),
        (
            "busy: the sampler's stats() call p50 / p99 ms",
            f"{ms(busy['stats_call']['p50'])} / {ms(busy['stats_call']['p99'])}",
            "",
            "",
        ),
        (
            f"busy: subscription lag p50 / p99 ms ({sub['changes']:,} changes)",
            f"{ms(sub['p50'])} / {ms(sub['p99'])}",
            "",
            f"{sub['early']} before the ack, {sub['unmatched']} unmatched",
        ),
        (
            f"busy: cold misses p50 / p99 ms ({cold['misses']} misses)",
            f"{ms(cold['p50'])} / {ms(cold['p99'])}",
            "",
            "",
        ),
        (
            "busy: CPU cores, " + " / ".join(busy["cpu"]),
            " / ".join(f"{c:.2f}" for c in busy["cpu"].values()),
            "",
            f"total {sum(busy['cpu'].values()):.2f} of {os.cpu_count()}",
        ),
        ("apply backlog after the busy phase, drained in", f"{out['drain_s']:.2f} s", "", ""),
        (
            f"write -> visible at rest p50 / p99 ms ({out['visible']['n']} samples)",
            f"{ms(out['visible']['p50'])} / {ms(out['visible']['p99'])}",
            "",
            "",
        ),
        (
            f"answers checked vs numpy ({out['check']['hot']} hot, {out['check']['cold']} cold)",
            f"{len(out['check']['wrong'])} wrong",
            "",
            f"subscription: {len(out['check']['subscription'])} wrong",
        ),
    ]
    if out["errors"]:
        rows.append(("busy load errors", str(len(out["errors"])), "", out["errors"][0][:80]))
    print(
        f"\nreads under write load, scale {args.scale}: medians of {args.windows} alternated windows of "
        f"{args.window:g} s per target, {args.threads} reader threads; load {out['load_s']:.0f} s"
        + (f"; serve {' '.join(args.server_arg)}" if args.server_arg else "")
    )
    print(
        f"{os.cpu_count()} cores; load average (1/5/15 min) before "
        f"{'/'.join(f'{x:.2f}' for x in out['loadavg_before'])}, after "
        f"{'/'.join(f'{x:.2f}' for x in out['loadavg_after'])}"
    )
    header = ("figure", "pomoview", "peer", "pomoview/peer")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for r in [header, *rows]:
        print(" | ".join(c.ljust(wd) for c, wd in zip(r, widths, strict=True)).rstrip())
