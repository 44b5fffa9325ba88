"""The server's handle on its hit replica process (hit_replica.py): start it, hand it its
configuration, learn its port, let it serve, stop it; and `ReplicaFront`, which puts it in
front of the server with the feed between them."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

import grpc

from pomoview.server.api.hit_replica import ReplicaConfig
from pomoview.server.api.listen import listen
from pomoview.server.api.security import ServerSecurity
from pomoview.server.limits.requests import Limits
from pomoview.server.metrics.metrics import Metrics
from pomoview.server.replica.feed import ReplicaFeed
from pomoview.server.views.view_state import ViewState


class ReplicaStartError(Exception):
    pass


class ReplicaProcess:
    def __init__(self, process: subprocess.Popen[bytes], conn: Connection, port: int) -> None:
        self.process = process
        self.conn = conn  # the feed's, once serving: server/replica/feed.py
        self.port = port

    @classmethod
    def start(cls, config: ReplicaConfig) -> ReplicaProcess:
        """The replica, bound to `config`'s address but not yet serving; raises
        ReplicaStartError (saying why) when it cannot listen or dies."""
        ours, theirs = socket.socketpair()
        process = subprocess.Popen(
            [sys.executable, "-m", "pomoview.server.api.hit_replica", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        conn = Connection(ours.detach())
        try:
            conn.send(config)
            reply = conn.recv()
        except (EOFError, OSError):
            process.wait()
            raise ReplicaStartError(
                f"the hit replica exited with {process.returncode} before it listened"
            ) from None
        if reply[0] != "bound":
            process.wait()
            raise ReplicaStartError(reply[1])
        return cls(process, conn, reply[1])

    def serve(self) -> None:
        """From now on the replica accepts calls (the server behind it is up)."""
        self.conn.send("start")

    def stop(self) -> None:
        """Ends the replica and waits for it (kills it after 10 s); the socket is the feed's
        to close (ReplicaFeed.close). A signal, since closing the socket here would send no
        end of file while a thread of ours still reads it."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ReplicaFront:
    """The hit replica in front of this server, from binding to stopping: the replica
    process on the public address, this server on a local socket in a private folder, and
    the feed of the readers' changes between them (server/replica/feed.py)."""

    def __init__(self, server: grpc.Server, replica: ReplicaProcess, folder: str) -> None:
        self.server = server  # this server's gRPC server, on the local socket
        self.replica = replica
        self._folder = folder
        self._feed: ReplicaFeed | None = None
        self.lost = threading.Event()  # the replica went away

    @classmethod
    def bind(
        cls, host: str, port: int, security: ServerSecurity, limits: Limits, threads: int, switch: float
    ) -> ReplicaFront:
        """This server on a local socket, and the hit replica bound to `host:port` (not
        serving yet). The local socket needs no TLS; the token, which the replica passes on,
        is checked here as well. Raises ReplicaStartError when either cannot listen."""
        folder = tempfile.mkdtemp(prefix="pomoview-")
        upstream = f"unix:{folder}/server.sock"
        listening = listen(
            upstream, dataclasses.replace(security, cert=None, key=None, client_ca=None), limits, threads
        )
        if isinstance(listening, str):
            raise ReplicaStartError(listening)
        config = ReplicaConfig(host, port, upstream, security, limits, threads, switch)
        return cls(listening[0], ReplicaProcess.start(config), folder)

    def feed(self, view: ViewState, metrics: Metrics, on_lost: Callable[[], None]) -> ReplicaFeed:
        """The feed of `view`'s readers to the replica; `on_lost` runs if the replica goes."""

        def lost() -> None:
            self.lost.set()
            on_lost()

        self._feed = ReplicaFeed(view, self.replica.conn, metrics, lost)
        return self._feed

    def serve(self) -> None:
        """The replica takes calls, and the feed starts (after the replica's start message:
        one thread writes the socket at a time)."""
        assert self._feed is not None
        self.replica.serve()
        self._feed.start()

    def stop(self) -> None:
        if self._feed is not None:
            self._feed.stop()
        self.replica.stop()
        if self._feed is not None:
            self._feed.close()
        shutil.rmtree(self._folder, ignore_errors=True)
