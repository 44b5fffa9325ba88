"""bench/triangles.py's tables: the two plans side by side, the peers, the writes against
recomputing, and the issue's goals (reported, not asserted)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from tables import table

Results = list[dict[str, Any]]  # one plan's runs, a dict per round
WRITE_KINDS = ("insert hub", "delete hub", "insert random", "delete random")
WHOLE, KEYED = "triangles()", "tri(a)"




def median(runs: Results, get: Callable[[dict[str, Any]], float]) -> float:
    return statistics.median(get(r) for r in runs)


def spread(runs: Results, get: Callable[[dict[str, Any]], float]) -> str:
    """The rounds' lowest and highest, when there are several."""
    values = [get(r) for r in runs]
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else "1 round"


def pooled(runs: Results, get: Callable[[dict[str, Any]], list[float]]) -> list[float]:
    return [x for r in runs for x in get(r)]


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def mib(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def short(detail: str) -> str:
    return detail if len(detail) <= 28 else detail.split("(")[0]


def write_times(runs: Results, kinds: Sequence[str] = WRITE_KINDS) -> list[float]:
    return pooled(runs, lambda r: [t["s"] for k in kinds for t in r["writes"][k]])


def plan_figures(runs: Results, inputs_output: int) -> dict[str, tuple[str, float]]:
    """Each figure of one plan: its text and the number the ratio column divides."""
    whole, jobs = median(runs, lambda r: r["whole"]["s"]), median(runs, lambda r: r["whole"]["jobs"])
    largest = median(runs, lambda r: r["whole"]["states"]["largest"])
    st, keyed = runs[0]["whole"]["states"], runs[0]["keyed"]["states"]
    growth = median(runs, lambda r: r["whole"]["rss_after"] - r["whole"]["rss_before"])
    after = median(runs, lambda r: r["rss_writes"] - r["whole"]["rss_before"])
    first = median(runs, lambda r: r["keyed"]["first_s"])
    cold, warm = pooled(runs, lambda r: r["keyed"]["cold"]), pooled(runs, lambda r: r["keyed"]["warm"])
    cold_jobs = pooled(runs, lambda r: r["keyed"]["jobs"])
    out = {
        "whole": (f"{whole:.2f} ({spread(runs, lambda r: r['whole']['s'])}; {jobs:.0f} jobs)", whole),
        "largest": (f"{largest:,.0f} ({short(st['largest_detail'])})", largest),
        "largest_io": (f"{largest / inputs_output:.2f}x", largest / inputs_output),
        "total": (f"{st['total']:,} ({st['sources']} SourceIndex)", st["total"]),
        "rss": (mib(growth), growth),
        "reread": (f"{median(runs, lambda r: r['reread_s']):.2f}", median(runs, lambda r: r["reread_s"])),
        "first": (f"{first:.2f} ({median(runs, lambda r: r['keyed']['first_jobs']):.0f} jobs)", first),
        "cold": (f"{p50(cold) * 1e3:.1f} ({p50(cold_jobs):.0f} jobs)", p50(cold)),
        "warm": (f"{p50(warm) * 1e3:.2f}", p50(warm)),
        "keyed_largest": (f"{keyed['largest']:,} ({short(keyed['largest_detail'])})", keyed["largest"]),
        "rss_writes": (mib(after), after),
        "start": (f"{median(runs, lambda r: r['start_s']):.1f}", median(runs, lambda r: r["start_s"])),
    }
    for kind in WRITE_KINDS:
        trials = [t for r in runs for t in r["writes"][kind]]
        s, ack = p50([t["s"] for t in trials]), p50([t["ack"] for t in trials])
        jobs = p50([t["jobs"] for t in trials])
        out[kind] = (f"{s * 1e3:.1f} (ack {ack * 1e3:.1f}; {jobs:.0f} jobs)", s)
    return out


LABELS = {
    "whole": "hydration + read, s (rounds' range; Spark jobs)",
    "largest": "largest intermediate state, rows",
    "largest_io": "  / (inputs + output)",
    "total": "all states' rows",
    "rss": "server RSS growth, MiB",
    "reread": "read again after the writes, s",
    "first": "the hub's lookup (the first), s (jobs)",
    "cold": "then each random vertex's, p50 ms (jobs)",
    "warm": "every key again (warm), p50 ms",
    "keyed_largest": "largest intermediate state, rows",
    "insert hub": "insert, hub -> 2 steps away: p50 ms",
    "delete hub": "delete it: p50 ms",
    "insert random": "insert, a random edge: p50 ms",
    "delete random": "delete it: p50 ms",
    "rss_writes": "RSS growth by the writes' end (tri(a)'s join too), MiB",
    "start": "server start, Spark up, a warm-up lookup: s",
}
SECTIONS = (
    ("whole view triangles(), first lookup", ("whole", "largest", "largest_io", "total", "rss", "reread")),
    ("keyed view tri(a), from nothing", ("first", "cold", "warm", "keyed_largest")),
    ("one edge, until a min_epoch lookup of tri(a: src)", WRITE_KINDS),
    ("the server process", ("rss_writes", "start")),
)


def plans_table(out: dict[str, Any]) -> dict[str, dict[str, tuple[str, float]]]:
    figures = {
        p: plan_figures(runs, out["shape"].edges + out["triangles"]) for p, runs in out["results"].items()
    }
    w, b = figures["wcoj"], figures["binary"]
    rows: list[tuple[str, ...]] = []
    for section, keys in SECTIONS:
        rows.append((section, "", "", ""))
        for key in keys:
            ratio = b[key][1] / w[key][1] if w[key][1] else float("nan")
            rows.append((f"  {LABELS[key]}", w[key][0], b[key][0], f"{ratio:,.1f}x"))
    rounds = len(out["results"]["wcoj"])
    table(f"the two plans, medians of {rounds} rounds (A B A B)", "figure|wcoj|binary|binary / wcoj", rows)
    return figures


def states_table(out: dict[str, Any]) -> None:
    rows: list[tuple[str, ...]] = []
    for plan, runs in out["results"].items():
        for view, states in ((WHOLE, runs[0]["whole"]["states"]), (KEYED, runs[0]["keyed"]["states"])):
            for i, (node, operator, detail, count) in enumerate(states["nodes"]):
                first = (plan, view) if i == 0 else ("", "")
                rows.append((*first, node, operator, f"{count:,}", detail[:90]))
    title = "stateful nodes (Describe), round 1: triangles() after its first lookup, tri(a) after its keys'"
    table(title, "plan|view|node|operator|rows|detail", rows)


def peers_table(out: dict[str, Any], figures: dict[str, dict[str, tuple[str, float]]]) -> dict[str, float]:
    peers = out["peers"]
    found = {"duck": statistics.median(p["duck"] for p in peers)}
    if "clingo" in peers[0]:
        found["clingo"] = statistics.median(p["clingo"] for p in peers)
    names = {
        "duck": "DuckDB: SQL triangle query over the Parquet file",
        "clingo": "clingo: parse, ground, solve",
    }
    rows = []
    for peer, s in found.items():
        w, b = figures["wcoj"]["whole"][1], figures["binary"]["whole"][1]
        rows.append((names[peer], f"{s:.2f}", f"{w / s:.2f}x", f"{b / s:.2f}x"))
    duck_keyed = pooled(out["results"]["wcoj"] + out["results"]["binary"], lambda r: r["keyed"]["duck"])
    found["duck_keyed"] = p50(duck_keyed)
    rows.append(
        (
            "DuckDB: one vertex's triangles (WHERE a = v), p50 ms",
            f"{found['duck_keyed'] * 1e3:.1f}",
            f"cold {figures['wcoj']['cold'][1] / found['duck_keyed']:.2f}x, "
            f"warm {figures['wcoj']['warm'][1] / found['duck_keyed']:.3f}x",
            f"cold {figures['binary']['cold'][1] / found['duck_keyed']:.2f}x, "
            f"warm {figures['binary']['warm'][1] / found['duck_keyed']:.3f}x",
        )
    )
    table("peers in the same run, medians", "peer|s|pomoview wcoj / peer|pomoview binary / peer", rows)
    return found


def writes_table(out: dict[str, Any], figures: dict[str, dict[str, tuple[str, float]]], duck: float) -> None:
    rows = []
    for plan, runs in out["results"].items():
        times = write_times(runs)
        write = p50(times)
        hydration = figures[plan]["whole"][1]
        rows.append(
            (
                plan,
                f"{write * 1e3:.1f} ({len(times)} writes)",
                f"{hydration / write:,.0f}x",
                f"{duck / write:,.1f}x",
            )
        )
    changed = [t["changed"] for t in out["results"]["wcoj"][0]["writes"]["insert hub"]]
    title = (
        f"one-edge writes against recomputing the view (each hub insert adds {min(changed)} to "
        f"{max(changed)} triangles with a = hub)"
    )
    table(title, "plan|write until visible, p50 ms|hydration / write|DuckDB recompute / write", rows)


def goals(out: dict[str, Any], figures: dict[str, dict[str, tuple[str, float]]], duck: float) -> None:
    w, b = figures["wcoj"], figures["binary"]
    speedup = b["whole"][1] / w["whole"][1]
    write = p50(write_times(out["results"]["wcoj"]))
    hydration = w["whole"][1]
    lines = [
        (
            f"wcoj largest state <= 2x (inputs + output): {w['largest_io'][1]:.2f}x "
            f"(binary: {b['largest_io'][1]:.1f}x, the two-paths)",
            w["largest_io"][1] <= 2.0,
        ),
        (f"hydration >= 10x faster than forced binary: {speedup:.1f}x", speedup >= 10.0),
        (
            f"one-edge write >= 100x cheaper than its hydration: hydration / write {hydration / write:,.0f}x",
            hydration / write >= 100.0,
        ),
        (
            f"one-edge write >= 100x cheaper than DuckDB's recompute: DuckDB / write {duck / write:,.1f}x",
            duck / write >= 100.0,
        ),
        (f"answers equal DuckDB's and clingo's: {out['checked']:,} checked", not out["wrong"]),
    ]
    print("\ngoals (reported, not asserted):")
    for text, met in lines:
        print(f"  {'met    ' if met else 'NOT met'}  {text}")


def print_tables(out: dict[str, Any]) -> None:
    args, s = out["args"], out["shape"]
    before, after = ("/".join(f"{x:.2f}" for x in out[k]) for k in ("loadavg_before", "loadavg_after"))
    print(
        f"\ntriangles over a power-law graph (skew {args.skew}, seed {args.seed}): {s.edges:,} edges among "
        f"{s.vertices:,} vertices, max out-degree {s.max_out:,}, max in-degree {s.max_in:,}; "
        f"{s.two_paths:,} two-paths ({s.two_paths / s.edges:,.0f} per edge; through the hub "
        f"{s.hub_in:,} in x {s.hub_out:,} out = {s.hub_in * s.hub_out:,}), {out['triangles']:,} triangles; "
        f"inputs + output {s.edges + out['triangles']:,} rows"
    )
    print(
        f"`pomoview load` {out['load']['s']:.1f} s; {os.cpu_count()} cores, load average before {before}, "
        f"after {after}" + (f"; serve {' '.join(args.server_arg)}" if args.server_arg else "")
    )
    figures = plans_table(out)
    states_table(out)
    found = peers_table(out, figures)
    writes_table(out, figures, found["duck"])
    goals(out, figures, found["duck"])
    for note in out["notes"]:
        print(f"note: {note}")
    if out["wrong"]:
        print(f"\nanswers: {len(out['wrong'])} of {out['checked']:,} checks FAILED:")
        for line in out["wrong"][:20]:
            print(f"  {line}")
    else:
        peers = "DuckDB and clingo" if "clingo" in out["peers"][0] else "DuckDB"
        print(f"\nanswers: {out['checked']:,} checked against {peers}, explain's plans too: all equal")
