"""bench/recursive_lookup.py's tables: one per dataset (the partial server's figures and
the eviction server's), the --full-state peer's, and the notes."""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from recursive_lookup_data import DATASETS, pct
from tables import table


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5) * 1e3:.2f} / {pct(values, 0.99) * 1e3:.2f}" if values else "-"


def mib(value: int) -> str:
    return f"{value / 2**20:,.0f}"


def ratio(a: list[float], b: list[float]) -> str:
    return f"{pct(a, 0.5) / pct(b, 0.5):,.1f}x" if a and b else "-"


def dataset_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    cold, zipf, st, up = r["cold"], r["zipf"], r["state"], r["updates"]
    jobs = f"median {statistics.median(cold['jobs']):g}, max {max(cold['jobs'])}"
    others = sum(st["others"].values())
    by_op = ", ".join(f"{op} {n:,}" for op, n in st["others"].items())
    unmeasured = ", ".join(st["unmeasured"]) or "none"
    full = f"{'' if r['full_exact'] else '~'}{r['full']:,}"
    held, first = r["rss_held"] - r["rss_before"], r["rss_first"] - r["rss_before"]
    evicted = r["rss_evicted"] - r["rss_before"]
    return [
        (
            "first lookup of the view (sources hydrated whole) s",
            f"{r['first_s']:.2f}",
            f"Spark jobs {r['first_jobs']}",
        ),
        (
            "cold lookup p50 / p99 ms",
            ms(cold["s"]),
            f"BFS {ms(cold['bfs'])} ({ratio(cold['s'], cold['bfs'])}); "
            f"clingo {ms(cold['clingo'])} (pomoview / clingo {ratio(cold['s'], cold['clingo'])})",
        ),
        ("cold lookup: Spark jobs per lookup", jobs, ""),
        (
            "warm lookup p50 / p99 ms (the cold keys again)",
            ms(cold["warm"]),
            f"BFS {ms(cold['warm_bfs'])} ({ratio(cold['warm'], cold['warm_bfs'])})",
        ),
        (f"Zipf lookups: first of a key p50 / p99 ms ({len(zipf['cold'])})", ms(zipf["cold"]), ""),
        (f"Zipf lookups: warm p50 / p99 ms ({len(zipf['warm'])})", ms(zipf["warm"]), ""),
        (
            f"state: Reader rows, {len(r['demanded'])} keys demanded",
            f"{st['reader']:,}",
            f"demanded closures {r['closures']:,} ({st['reader'] / max(1, r['closures']):.2f}x); "
            f"full closure {full} ({st['reader'] / max(1, r['full']):.4f}x)",
        ),
        (
            "state: the view's other states' rows",
            f"{others:,}",
            f"{by_op}; with the Reader {(st['reader'] + others) / max(1, r['closures']):.2f}x the demanded "
            f"closures; unmeasured by Stats: {unmeasured}",
        ),
        (
            "edge insert at a demanded key, until visible p50 / p99 ms",
            ms(up["insert"]),
            f"ack {ms(up['insert_ack'])}; demanded answers changed: median "
            f"{statistics.median(up['answers']):g}, max {max(up['answers'])}; "
            "that key's cold lookup / this: median "
            f"{statistics.median(up['ratio'][0::2]):,.1f}x",
        ),
        (
            "edge delete at a demanded key, until visible p50 / p99 ms",
            ms(up["delete"]),
            f"ack {ms(up['delete_ack'])}; that key's cold lookup / this: median "
            f"{statistics.median(up['ratio'][1::2]):,.1f}x",
        ),
        ("server RSS MiB: before the view's first lookup", mib(r["rss_before"]), ""),
        ("server RSS MiB: after it (sources hydrated whole)", mib(r["rss_first"]), f"+{mib(first)}"),
        ("server RSS MiB: after every lookup and write", mib(r["rss_held"]), f"+{mib(held)}"),
        (
            "server RSS MiB: 1 s after Evict of everything",
            mib(r["rss_evicted"]),
            f"{evicted / 2**20:+,.0f} MiB ({100 * evicted / r['rss_before']:+.1f}% of before; goal within "
            f"10%); {r['evicted']['keys_evicted']:,} keys evicted, "
            f"{r['state_evicted']['reader']:,} reader rows left",
        ),
    ]


def evict_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    """The eviction server's figures for one view (evict_peer)."""
    first, held = r["rss_first"] - r["rss_before"], r["rss_held"] - r["rss_before"]
    after = r["rss_after"] - r["rss_before"]
    gate = "; ".join(r["state"]["gate"])
    return [
        ("--memory-budget 1K server: RSS MiB before the lookups", mib(r["rss_before"]), ""),
        ("  after the first lookup (sources hydrated whole)", mib(r["rss_first"]), f"+{mib(first)}"),
        (
            f"  with {r['keys'] - 1} more keys looked up (answered in memory; those left)",
            mib(r["rss_held"]),
            f"+{mib(held)}; Reader rows {r['held']['reader']:,}; {'; '.join(r['held']['gate'])}",
        ),
        (
            "  after a write: the budget evicts every key",
            mib(r["rss_after"]),
            f"{after / 2**20:+,.0f} MiB ({100 * after / r['rss_before']:+.1f}% of before); "
            f"{r['rounds']} eviction rounds; {r['present']} keys present; {gate}",
        ),
        (
            "  the same keys again: held / after a write",
            f"{mib(r['rss_held2'])} / {mib(r['rss_after2'])}",
            f"{(r['rss_after2'] - r['rss_after']) / 2**20:+,.0f} MiB against the first eviction",
        ),
    ]


def print_tables(out: dict[str, Any], args: argparse.Namespace) -> None:
    before, after = ("/".join(f"{x:.2f}" for x in out[k]) for k in ("loadavg_before", "loadavg_after"))
    print(
        f"\nrecursive lookups, scale {args.scale}: load {out['load_s']:.0f} s; {os.cpu_count()} cores, "
        f"load average before {before}, after {after}"
        + (f"; serve {' '.join(args.server_arg)}" if args.server_arg else "")
    )
    for ds in DATASETS:
        r = out[ds.name]
        title = (
            f"{ds.view}({ds.columns[0]}): {r['rows']:,} {ds.source} rows, {r['keys']:,} keys; "
            f"{args.cold} cold keys alternated with the peers, {args.lookups} Zipf lookups"
        )
        rows = dataset_rows(r) + (evict_rows(out["evict"][ds.name]) if "evict" in out else [])
        table(title, "figure|pomoview|peers / ratios", rows)
    if "full_state" in out:
        f = out["full_state"]
        rows = []
        for ds in DATASETS:
            r = f[ds.name]
            held = r["state"]["reader"] + sum(r["state"]["others"].values())
            rows.append(
                (
                    ds.view,
                    f"{r['first_s']:.2f} ({r['first_jobs']} jobs)",
                    ms(r["s"]),
                    f"{ms(r['bfs'])} ({ratio(r['s'], r['bfs'])})",
                    f"{held:,}",
                    f"{r['full']:,}",
                    mib(r["rss_growth"]),
                )
            )
        header = "view|first lookup s (whole fixpoint)|then p50 / p99 ms|BFS p50 / p99 ms|"
        header += "state rows (measured)|full closure|RSS growth MiB"
        table(f"peer: serve --full-state at scale {f['scale']} (load {f['load_s']:.0f} s)", header, rows)
    held, dropped = out["reinstall"]
    print(
        f"\nthe partial server's RSS after both views' lookups {mib(held)} MiB; a second after installing "
        f"the program again (every state dropped) {mib(dropped)} MiB"
    )
    for note in out["notes"]:
        print(f"note: {note}")
    checked = ["pomoview"] + ["clingo"] * args.clingo + ["--full-state"] * ("full_state" in out)
    print(f"answers checked against BFS ({', '.join(checked)}): all equal")
