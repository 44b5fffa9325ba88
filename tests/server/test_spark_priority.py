"""`spark/priority.py`: lowering the CPU priority of every thread of a process (the Spark
driver JVM's, in the server), checked on a real child process through /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pomoview.server.spark.priority import MAX_NICE, lower_priority
from tests.e2e.server_process import thread_niceness

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")

# A child with three threads besides its main one; each line on its stdin starts one more
# (started by an already running thread, as a JVM's new threads are) and answers "ok".
CHILD = """
import sys, threading
stop = threading.Event()
for _ in range(3):
    threading.Thread(target=stop.wait, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    threading.Thread(target=stop.wait, daemon=True).start()
    print("ok", flush=True)
"""


@pytest.fixture
def child() -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    yield process
    process.kill()
    process.wait()


def test_every_thread_is_lowered_and_a_later_thread_inherits_it(child: subprocess.Popen[str]) -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    before = thread_niceness(child.pid)
    assert len(before) >= 4 and set(before.values()) == {own}
    assert lower_priority(child.pid, 3) == len(before)
    after = thread_niceness(child.pid)
    assert set(after) == set(before) and set(after.values()) == {min(MAX_NICE, own + 3)}
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write("one more\n")
    child.stdin.flush()
    assert child.stdout.readline() == "ok\n"
    grown = thread_niceness(child.pid)
    assert len(grown) == len(after) + 1 and set(grown.values()) == {min(MAX_NICE, own + 3)}


def test_zero_changes_nothing_and_the_lowest_priority_is_the_bound(child: subprocess.Popen[str]) -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    assert lower_priority(child.pid, 0) == 0
    assert set(thread_niceness(child.pid).values()) == {own}
    lower_priority(child.pid, 100)
    assert set(thread_niceness(child.pid).values()) == {MAX_NICE}
    # Lowering again by less does not raise it back (raising needs privileges, and the
    # JVM must stay below the server).
    lower_priority(child.pid, 1)
    assert set(thread_niceness(child.pid).values()) == {MAX_NICE}


def test_a_process_that_is_gone_is_no_error() -> None:
    assert lower_priority(2**22 + 12345, 5) == 0  # above Linux's default pid_max
