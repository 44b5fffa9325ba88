"""How long a thread of the server's process may hold the interpreter lock while another waits
for it: short where hits are answered, long in the server's process when the hit replica
answers them (`serve --hit-replica`).

CPython asks the thread that holds the GIL to give it up once it has held it for
`sys.getswitchinterval()` while another thread waits (CPython's default: 5 ms).

- `SWITCH_INTERVAL`, where hits are answered (the server without a replica, and the replica):
  the apply and the flush are long runs of Python; a hit needs the GIL a few times for about
  100 us each, so at 5 ms a turn it waited far longer than it worked.
- `SWITCH_INTERVAL_WITH_REPLICA`, in the server's process when the replica answers the hits:
  there the apply is the one thread that computes for long (a busy write load's step takes
  tens of ms), and the others (writes' validation and logging, the replica feed, stats, cold
  misses) wake briefly. At 0.5 ms a step was cut into a hundred slices, and on a machine whose
  cores were all taken each slice given away waited its turn to come back: in
  bench/hits_under_load.py's busy phase (2 cores; the readers, the writer and the JVM on the
  same machine) the machine was idle 0.3-1.0 s of 112, the server's process got 0.56 of a
  core, and its dataflow thread was runnable 83% of the time (py-spy) while it held the
  dataflow lock 95%.

Measured, `bench/hits_under_load.py --scale 0.1 --windows 2 --server-arg=--hit-replica`, the
server's process at 50 ms against 0.5 ms, alternated (A B A B):

| | 50 ms | 0.5 ms |
|---|---|---|
| server apply lag p50 / p99 | 11 / 150, 10 / 204 ms | 64 / 371, 63 / 352 ms |
| subscription lag p99 | 138, 144 ms | 200, 197 ms |
| write ack p99 (batches of 1,000) | 101, 91 ms | 204, 175 ms |
| votes applied | 25,300, 24,200/s | 24,000, 25,500/s |

Busy hits, which the replica answers, moved within the runs' spread (0.58-0.86x echo either
way).
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("pomoview.gil")

# The switch interval where hits are answered.
SWITCH_INTERVAL = 0.0005
# The switch interval in the server's process when a hit replica answers the hits.
SWITCH_INTERVAL_WITH_REPLICA = 0.05


def set_switch_interval(hit_replica: bool) -> float:
    """Sets the server's process's switch interval, with or without a hit replica; returns it."""
    interval = SWITCH_INTERVAL_WITH_REPLICA if hit_replica else SWITCH_INTERVAL
    sys.setswitchinterval(interval)
    why = "hits answered by the replica" if hit_replica else "hits answered here"
    log.info("interpreter switch interval: %.1f ms (%s)", interval * 1000, why)
    return interval
