"""The pomoview server.

gRPC's C core, by default, runs fork handlers around every fork() of a process that uses it.
The server forks only to exec a child at once (pyspark's launch of the driver JVM, with a
preexec_fn, so a real fork); the handlers, run while other threads are in gRPC calls, made
about one such child in 50 die of SIGABRT or SIGSEGV before exec (the Spark boot then failed
with JAVA_GATEWAY_EXITED), and made the server's own poller fail with EBADF. The server never
uses gRPC in a forked child, so it turns them off, before anything imports grpc; a setting
in the environment wins. tests/server/test_fork_safety.py shows both.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
