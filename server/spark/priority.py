"""The CPU priority of the Spark driver JVM: below the server's, so that Spark's background work
yields the cores to hits and to the apply.

The driver JVM runs on the server's machine whatever the master: with a local master it runs
every task too. Its work is background work for the server: flushes and compactions, the
planning and code generation of every upquery, and the JIT compilation of all of it. On the
2-core machine of bench/hits_under_load.py's busy phase it took 1.1 cores, half of it in its
JIT compiler threads, and left the server's dataflow thread 0.37 of a core; at a niceness of 10
the dataflow thread got 0.51 and the votes applied went from 34,000 to 45,000 a second (the
note of the stop that added this has the runs). RocksDB lowers the priority of its compaction
threads for the same reason (`Env::LowerThreadPoolCPUPriority`).

A lower priority only gives way when the cores are contended: an idle machine still runs
Spark's jobs at full speed. Under contention it is a trade: the Spark jobs of cold misses wait
too (in the same busy phase their median went from about 1 s to 1.7 s without readers and to
4.6 s with four reader threads), which `--spark-nice 0` undoes. Lowering only the JIT
compiler threads kept misses at 1 s but gained the apply little (35,000 votes/s against
44,000 with the whole JVM lowered). Raising a priority needs privileges; lowering it does not.

Linux only (the threads of a process are listed under /proc, and each has a niceness of its
own): elsewhere it does nothing. A thread the JVM starts later inherits the niceness of the
thread that starts it, so every thread is lowered, repeatedly until a pass finds no new one.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("pomoview.spark")

# `serve --spark-nice`'s default: how much lower than the server's the JVM's priority is.
DEFAULT_SPARK_NICE = 10
MAX_NICE = 19  # Linux's lowest priority
_PASSES = 5


def lower_priority(pid: int, by: int, proc: Path = Path("/proc")) -> int:
    """Lowers the CPU priority of every thread of process `pid` by `by` niceness steps (to at
    most MAX_NICE), above the niceness of this process; returns how many threads were
    lowered (0 when `by` is 0, the process is gone, or there is no /proc)."""
    if by <= 0:
        return 0
    target = min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, 0) + by)
    done: set[int] = set()
    for _ in range(_PASSES):
        try:
            threads = {int(t.name) for t in (proc / str(pid) / "task").iterdir()}
        except OSError:  # gone, or not Linux
            break
        new = threads - done
        if not new:
            break
        for tid in new:
            try:
                if os.getpriority(os.PRIO_PROCESS, tid) < target:
                    os.setpriority(os.PRIO_PROCESS, tid, target)
            except OSError:  # the thread ended between the listing and here
                pass
        done |= new
    if done:
        log.info("the Spark driver JVM (pid %d) runs at niceness %d (serve --spark-nice %d)", pid, target, by)
    return len(done)
