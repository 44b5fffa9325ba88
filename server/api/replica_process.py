"""The server's handle on its hit replica process (hit_replica.py): start it, hand it its
configuration, learn its port, let it serve, stop it."""

from __future__ import annotations

import socket
import subprocess
import sys
from multiprocessing.connection import Connection

from pomoview.server.api.hit_replica import ReplicaConfig


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
        """Ends the replica and waits for it (kills it after 10 s). A signal, since closing
        the socket here sends no end of file while a thread of ours still reads it."""
        self.process.terminate()
        if not self.conn.closed:
            self.conn.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
