"""A server stopped while its Spark JVM still boots exits at once, cleanly, with no JVM left
behind and every acknowledged write kept."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from .server_process import VOTES, ServerProcess

# The stop of a server with no Spark session to wait for: gRPC's stop, the scheduler's
# threads, the kill of the booting JVM, the interpreter's exit. A boot takes 10 to 50 s here.
STOP_BOUND = 8.0
READY = "the Spark session is ready"


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """The live (not zombie) processes whose environment holds `marker`, with their command
    line: a server's, and whatever it started, however deep, even once orphaned."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ and stat[stat.rindex(")") + 2 :].split()[0] != "Z":
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]))
    return found


def stop_during_the_boot(server: ServerProcess, marker: str) -> float:
    """SIGTERMs `server` before its Spark session is up; returns how long it took to exit, once
    it is checked that it exited with 0 and left no process behind."""
    assert server.process is not None
    pid = server.process.pid
    # The boot runs once the JVM (or the launcher before it) is among the server's processes.
    deadline = time.monotonic() + 60
    while not [p for p in marked_processes(marker) if p[0] != pid]:
        assert time.monotonic() < deadline, "the server launched no JVM"
        time.sleep(0.05)
    assert READY not in server.log_path.read_text(), "the JVM booted before the test could stop it"
    started = time.monotonic()
    code = server.stop()
    took = time.monotonic() - started
    left = marked_processes(marker)
    log = server.log_path.read_text()
    assert code == 0, log[-3000:]
    assert READY not in log  # it was stopped during the boot, not after it
    assert not left, f"processes outlived the server: {left}"
    return took


def test_sigterm_while_spark_boots_exits_at_once_and_keeps_acknowledged_writes(tmp_path: Path) -> None:
    marker = f"POMOVIEW_SHUTDOWN_TEST={uuid.uuid4().hex}"
    env = {"POMOVIEW_SHUTDOWN_TEST": marker.split("=")[1]}
    data = tmp_path / "data"
    server = ServerProcess(data, program=VOTES, env=env).start()
    try:
        with server.client() as db:
            # Acknowledged, so in the log; the flusher then waits for the booting JVM.
            db.write("article", insert=[{"id": 1, "title": "one"}])
            epoch = db.write("vote", insert=[{"article_id": 1, "user_id": 7}])
        took = stop_during_the_boot(server, marker)
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()
    assert took < STOP_BOUND, f"the stop took {took:.1f} s: it waited for the Spark boot"

    # The restarted server recovers the writes from the log (no JVM needed), and its own stop,
    # again during its boot, is as quick.
    restarted = ServerProcess(data, env=env).start()
    try:
        with restarted.client() as db:
            assert db.stats()["durable_epoch"] == epoch
        took = stop_during_the_boot(restarted, marker)
    finally:
        if restarted.process is not None and restarted.process.poll() is None:
            restarted.kill()
    assert took < STOP_BOUND, f"the stop took {took:.1f} s: it waited for the Spark boot"
