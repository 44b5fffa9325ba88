"""The pomoview server.

Importing it sets two process-wide defaults, before anything imports grpc or pyarrow; a
setting already in the environment wins. tests/server/test_process_settings.py shows both.

- gRPC's fork handlers are off. gRPC's C core, by default, runs them around every fork() of
  a process that uses it. The server forks only to exec a child at once (pyspark's launch of
  the driver JVM, with a preexec_fn, so a real fork); the handlers, run while other threads
  were in gRPC calls, made about one such child in 50 die of SIGABRT or SIGSEGV before exec
  (the Spark boot then failed with JAVA_GATEWAY_EXITED), and the server's own poller fail
  with EBADF. The server never uses gRPC in a forked child.
- Arrow allocates from the system allocator, not its default mimalloc: with mimalloc, each
  of the server's threads (gRPC's pool is wide) kept memory of its own after Arrow freed it,
  and RSS grew under the mixed load test's minutes (219 to 243 MiB over 300 s, while Python
  objects, glibc's heap and Arrow's allocated bytes stayed flat); with the system allocator
  it held 207.7 to 211.8 MiB over 200 s.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
