"""What importing `pomoview.server` sets for the whole process (server/__init__.py).

A process serving gRPC forks children that exec at once (pyspark launches its driver JVM
so, with a preexec_fn: a real fork) and none of them dies before its exec.

With gRPC's default fork handlers on, about one child in 50 died of SIGABRT or SIGSEGV when
other threads were in gRPC calls (the server's Spark boot then failed with
JAVA_GATEWAY_EXITED); `pomoview.server` turns them off (server/__init__.py). The child
process below starts with the setting absent from its environment, as `pomoview serve` does
when nobody set it, so that it is the import of `pomoview.server` that must set it.

Arrow allocates from the system allocator: with Arrow's default, mimalloc, each of the
server's many threads kept memory of its own after Arrow had freed it, and RSS kept growing
under the mixed load (see server/__init__.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

FORKS = 500

CHILD = textwrap.dedent(
    f"""
    import pomoview.server  # first, as `python -m pomoview.server.cli` imports it
    import subprocess, sys, threading
    from concurrent import futures
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(8))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stop = threading.Event()

    def call() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{{port}}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not stop.is_set():
                stub.Check(health_pb2.HealthCheckRequest())

    callers = [threading.Thread(target=call) for _ in range(4)]
    for t in callers:
        t.start()
    codes = [subprocess.Popen(["true"], preexec_fn=lambda: None).wait() for _ in range({FORKS})]
    stop.set()
    for t in callers:
        t.join()
    server.stop(None)
    print(sorted(c for c in codes if c != 0))
    """
)


def test_children_forked_during_grpc_calls_all_reach_their_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = done.stdout.strip().splitlines()[-1]
    assert failed == "[]", f"of {FORKS} forked children, these exit codes: {failed}"


def test_arrow_allocates_from_the_system_allocator_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    probe = "import pomoview.server, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["system"]
    told = subprocess.run(
        [sys.executable, "-c", probe], env={**env, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"},
        capture_output=True, text=True, timeout=120,
    )
    assert told.stdout.split() == ["mimalloc"], told.stderr[-3000:]
