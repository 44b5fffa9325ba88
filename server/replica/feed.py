"""The server's side of the hit replica: it sends every change of the readers' keys to the
replica, and takes back the replica's reads.

Why a second process: hits served beside the apply share its interpreter lock, its garbage
collections and its CPU share, so under write load they slow down many times over
(bench/hits_under_load.py). The replica (server/api/hit_replica.py) answers present keys
from its own copy, in its own process, and forwards everything else here.

How the copy stays exact: `collect` runs with the dataflow lock held, just before every
release of it (`ViewState.on_release`), so every change made under the lock is queued, in
lock order, before any other thread of this process can see it. It sends the rows of each
key a reader noted in `Reader.changed` (a delta, a fill, an eviction), as of the applied
epoch; a new graph first sends `Views`, which drops the replica's copy. A thread sends the
queue on; another applies the replica's `Reads`: eviction marks (`Reader.mark_read`, as a
hit here sets them) and the hit counters.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent import futures
from multiprocessing.connection import Connection

from pomoview.planner.compile import ProgramGraph
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.replica.messages import Changes, Outbox, ReaderName, Reads, Views
from pomoview.server.views.view_state import ViewState

log = logging.getLogger("pomoview.replica")
# A serialized WriteRequest -> (True, the serialized WriteResponse) or (False, (status, message)).
WriteHandler = Callable[[bytes], tuple[bool, bytes | tuple[str, str]]]


class ReplicaFeed:
    def __init__(
        self, view: ViewState, conn: Connection, metrics: Metrics, on_lost: Callable[[], None]
    ) -> None:
        self._view = view
        self._conn = conn
        self._metrics = metrics
        self._on_lost = on_lost  # the replica went away
        self._out = Outbox()
        self._graph: ProgramGraph | None = None
        self._started = False  # the first `collect` sends `Views` whatever the graph
        self._epoch = -1
        self._readers: set[ReaderName] = set()  # those the replica has been sent
        self.replica_hits = 0
        self._stopping = False
        # Writes the replica passes over the socket (`serve_writes`), answered on a pool: a
        # write waits for its group commit, and writers waiting together share one fsync.
        self._write: WriteHandler | None = None
        self._writers = futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="replica-write")
        self._send_lock = threading.Lock()  # the send thread and the write answers share the socket
        self.batches_sent = 0  # each send of what was queued, merged (Outbox)
        self._threads = [
            threading.Thread(target=self._send_loop, name="replica-send", daemon=True),
            threading.Thread(target=self._read_loop, name="replica-reads", daemon=True),
        ]

    def serve_writes(self, handler: WriteHandler) -> None:
        """From now on the replica's writes are answered by `handler` (before `start`)."""
        self._write = handler

    def start(self) -> None:
        with self._view.lock:
            self._view.on_release(self.collect)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stops sending; the replica's end may close from now on without it counting as
        lost. Then `close`, once the replica is gone."""
        self._stopping = True
        with self._view.lock:
            self._view.on_release(None)
        self._out.close()
        self._threads[0].join(timeout=5)

    def close(self) -> None:
        """Closes the socket once the replica's end is closed (its reads thread has seen the
        end of it: closing a socket another thread reads would send no end of file)."""
        self._threads[1].join(timeout=5)
        self._writers.shutdown(wait=False, cancel_futures=True)
        self._conn.close()

    def collect(self) -> None:
        """Queues what changed under the lock (caller holds the dataflow lock)."""
        view = self._view
        if view.seq & 1:
            return  # an apply that failed half way left the step open: wait for the next
        graph = view.graph
        if graph is not self._graph or not self._started:
            self._new_graph(graph)
        if graph is None:
            return
        changes = []
        for name, reader in graph.graph.readers.items():
            if name not in self._readers:  # a new reader: all it holds
                self._readers.add(name)
                reader.changed = set(reader.state.keys())
            changed = reader.changed
            if not changed:
                continue
            reader.changed = set()
            # A noted key was present before or after its change (Reader.changed), so a key
            # missing now is one the replica holds, or held in between: gone either way.
            changes.append((name, {key: reader.rows_of(key) for key in changed}))
        if changes or view.applied_epoch != self._epoch:
            self._epoch = view.applied_epoch
            self._out.put(Changes(self._epoch, changes))

    def _new_graph(self, graph: ProgramGraph | None) -> None:
        if self._graph is not None:
            for reader in self._graph.graph.readers.values():
                reader.changed = None
        self._graph, self._started, self._readers = graph, True, set()
        program = self._view.program
        relations = (
            {}
            if program is None
            else {name: dataclasses.replace(program.relations[name], rules=[]) for name in program.views}
        )
        self._epoch = self._view.applied_epoch
        self._out.put(Views(relations, self._epoch))

    def sent(self) -> None:
        """Returns once everything queued so far is sent (tests)."""
        self._out.wait_sent()

    def _send_loop(self) -> None:
        while (messages := self._out.take()) is not None:
            try:
                with self._send_lock:
                    self._conn.send(messages)
            except OSError:
                log.error("the hit replica went away")
                self._on_lost()
                return
            self.batches_sent += 1
            self._out.sent()

    def _read_loop(self) -> None:
        while True:
            try:
                item: Reads | tuple[str, int, bytes] = self._conn.recv()
            except (EOFError, OSError):
                if not self._stopping:
                    log.error("the hit replica went away")
                    self._on_lost()
                return
            if isinstance(item, Reads):
                self.apply_reads(item)
            else:
                _, call, data = item
                self._writers.submit(self._answer_write, call, data)

    def _answer_write(self, call: int, data: bytes) -> None:
        handler = self._write
        assert handler is not None, "serve_writes comes before start"
        answer = handler(data)
        try:
            with self._send_lock:
                self._conn.send(("written", call, *answer))
        except OSError:
            pass  # the replica went away; the read loop says so

    def apply_reads(self, reads: Reads) -> None:
        """The replica's hits: counted, and their keys marked as read (as a hit here would)."""
        self.replica_hits += reads.hits
        self._metrics.lookups.inc(reads.hits)
        self._metrics.lookup_hits.inc(reads.hits)
        graph = self._view.published.graph
        if graph is None:
            return
        for name, keys in reads.keys:
            reader = graph.graph.readers.get(name)
            if reader is not None:
                reader.mark_read(keys)
