"""Where a benchmark's cores go: the CPU time of its processes, read from /proc (Linux), so
that a phase's table says how much of the machine each part took (the server, its hit
replica, its Spark JVM, the load, the readers, the peers).

`snapshot` reads every part's CPU seconds at once; `cores` turns two snapshots into cores
(CPU seconds per wall second). A server's part is its whole process tree, split by what each
process runs: the server's own process, the hit replica (`hit_replica` in its command line),
the Spark JVM (`java`), and anything else it started (Spark's launcher, Python workers). A
process that exits between two snapshots drops out of both sums (its CPU time is not
counted); one that starts between them counts from its start.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds of its own threads) of `pid`, or None once it
    has exited."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid`'s own threads so far (not its children's)."""
    stat = _stat(pid)
    if stat is None:
        raise ProcessLookupError(pid)
    return stat[1]


def _command(pid: int) -> str:
    try:
        return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _tree(root: int) -> dict[int, float]:
    """The CPU seconds of `root` and of every process below it, read in one pass over /proc."""
    stats = {int(e.name): _stat(int(e.name)) for e in _PROC.iterdir() if e.name.isdigit()}
    children: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        if stat is not None:
            children.setdefault(stat[0], []).append(pid)
    out: dict[int, float] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        stat = stats.get(pid)
        if stat is not None:
            out[pid] = stat[1]
        todo += children.get(pid, [])
    return out


def server_part(pid: int) -> str:
    """The part of a server's tree that process `pid` belongs to."""
    command = _command(pid)
    if "hit_replica" in command:
        return "hit replica"
    if "java" in command.split(" ", 1)[0]:
        return "Spark JVM"
    return "server, other"


def snapshot(server: int, others: dict[str, int]) -> dict[str, float]:
    """CPU seconds by part: the server's tree (`server_part`, the server's own process as
    "server") and each of `others` (a name -> a pid, that process alone)."""
    out: dict[str, float] = {"server": 0.0, "hit replica": 0.0, "Spark JVM": 0.0, "server, other": 0.0}
    for pid, seconds in _tree(server).items():
        out["server" if pid == server else server_part(pid)] += seconds
    for name, pid in others.items():
        stat = _stat(pid)
        out[name] = 0.0 if stat is None else stat[1]
    return out


def cores(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Each part's cores between two snapshots `seconds` apart."""
    return {name: max(0.0, after[name] - before.get(name, 0.0)) / seconds for name in after}
