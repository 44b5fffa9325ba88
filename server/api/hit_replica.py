"""The hit replica (`serve --hit-replica`): a process of its own on the server's public
port. It answers the lookups whose keys are all present in its copy of the server's
readers, and passes every other call, as bytes, to the server over a local socket.

Why: a hit served in the server's process shares the interpreter lock, the garbage
collections and the CPU share of the apply, so under write load hits slow down many times
over (bench/hits_under_load.py). Here they share nothing with it but the machine.

What a hit here is (server/replica/table.py): the keys' rows as of the last epoch the
server sent (server/replica/feed.py), encoded and cached per key as the server's readers
cache them, with that epoch in the answer. A lookup goes to the server when a key is
missing here, its `min_epoch` is past that epoch, it asks for a page (`limit`, `after`), or
anything in it is not exactly right (the server then says what is wrong, in its words).
The replica reports its hits and the keys they read back every `REPORT_SECONDS`, for the
server's eviction marks and counters.

The server starts it (replica_process.py) with one end of a socket pair as its argument,
and the replica lives as long as that socket: when the server goes, so does the replica.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.api.answers import ColumnEncoder, RowAnswer, answer_of
from pomoview.server.api.listen import listen
from pomoview.server.api.requests import KeyShapes, lookup_keys
from pomoview.server.api.security import ServerSecurity
from pomoview.server.errors import ServiceError
from pomoview.server.limits.requests import Limits
from pomoview.server.replica.table import ReplicaTable
from pomoview.server.scheduler.gc_policy import freeze_at_start
from pomoview.server.typed_rows import typed_keys

log = logging.getLogger("pomoview.replica")
REPORT_SECONDS = 0.1
_LOOKUP = "/pomoview.v1.ViewService/Lookup"
_WRITE = "/pomoview.v1.ViewService/Write"  # passed over the socket, not forwarded
# A client with no deadline leaves gRPC's "time remaining" at about forever.
_NO_DEADLINE = 1e8


@dataclass(frozen=True)
class ReplicaConfig:
    """What the server tells its replica at start: where to listen (as the server would),
    where the server is, and the server's security and limits, so that the replica refuses
    and accepts exactly what the server would."""

    host: str
    port: int
    upstream: str
    security: ServerSecurity
    limits: Limits
    threads: int
    switch_interval: float


class ReplicaLookups:
    """Lookups answered from the table when they can be, else by the server; and writes,
    whose acknowledged epochs a lookup's `min_epoch` may then wait for here."""

    def __init__(
        self,
        table: ReplicaTable,
        limits: Limits,
        forward: Callable[[bytes, Any], bytes],
        writes: ServerWrites,
    ) -> None:
        self._table = table
        self._limits = limits
        self._forward = forward  # a lookup to the server (`forwarding`)
        self._writes = writes
        # (id of the view's relation, columnar) -> (that relation, its answers' encoder)
        self._answers: dict[tuple[int, bool], tuple[object, RowAnswer | ColumnEncoder]] = {}
        self._key_shapes = KeyShapes()

    def lookup(self, data: bytes, context: grpc.ServicerContext) -> bytes:
        answer = self.hit(data)
        if answer is not None:
            return answer
        answer = self._forward(data, context)
        self._table.seen(pb.LookupResponse.FromString(answer).epoch)
        return answer

    def write(self, data: bytes, context: grpc.ServicerContext) -> bytes:
        ok, answer = self._writes.call(data)
        if not ok:
            code, details = answer
            context.abort(getattr(grpc.StatusCode, code), details)  # type: ignore[attr-defined]
        assert isinstance(answer, bytes)
        self._table.acked(pb.WriteResponse.FromString(answer).epoch)
        return answer

    def hit(self, data: bytes) -> bytes | None:
        """The answer's bytes when every key is present here; None: ask the server."""
        try:
            request = pb.LookupRequest.FromString(data)
        except DecodeError:
            return None
        relations = self._table.relations
        relation = None if relations is None else relations.get(request.view)
        if relation is None or request.HasField("limit") or request.HasField("after"):
            return None
        try:
            typed = self._key_shapes.typed(request, relation)
            keys = lookup_keys(request) if typed is None else typed
            if not len(keys) or len(keys) > self._limits.max_lookup_keys:
                return None
            key_attrs, tuples = typed_keys(relation, request.view, keys)
        except ServiceError:
            return None
        answer = self._answer(relation, request.columnar)
        min_epoch = request.min_epoch if request.HasField("min_epoch") else None
        hit = self._table.hits((request.view, key_attrs), tuples, min_epoch, answer.encode, answer.form)
        if hit is None:
            return None
        out = answer.response(*hit)
        # One past the limit is the server's to refuse, with its message (Limits.check_answer).
        return out if len(out) <= self._limits.max_message_bytes else None

    def _answer(self, relation: Any, columnar: bool) -> RowAnswer | ColumnEncoder:
        cached = self._answers.get((id(relation), columnar))
        if cached is not None and cached[0] is relation:
            return cached[1]
        answer = answer_of([(a, relation.types[a]) for a in relation.attributes], columnar)
        self._answers[(id(relation), columnar)] = (relation, answer)
        return answer


class ServerWrites:
    """Writes passed to the server over the feed's socket (ReplicaFeed.serve_writes), a
    cheaper hop than a gRPC call: the token was checked here, by the interceptor."""

    def __init__(self, conn: Connection, send_lock: threading.Lock) -> None:
        self._conn = conn
        self._send_lock = send_lock
        self._calls = 0
        self._waiting: dict[int, tuple[threading.Event, list[Any]]] = {}

    def call(self, data: bytes) -> tuple[bool, Any]:
        done, answer = threading.Event(), list[Any]()
        with self._send_lock:
            self._calls += 1
            call = self._calls
            self._waiting[call] = (done, answer)
            self._conn.send(("write", call, data))
        done.wait()
        ok, payload = answer
        return ok, payload

    def answered(self, call: int, ok: bool, payload: Any) -> None:
        done, answer = self._waiting.pop(call)
        answer += [ok, payload]
        done.set()


class Forwarder(grpc.GenericRpcHandler):
    """Every method of the server's services, passed through as bytes (metadata, deadline,
    status and cancellation included); Lookup first tries the replica's table."""

    def __init__(self, channel: grpc.Channel, lookups: ReplicaLookups) -> None:
        self._channel = channel
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        for service in (
            pb.DESCRIPTOR.services_by_name["ViewService"],
            health_pb2.DESCRIPTOR.services_by_name["Health"],
            reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
        ):
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                self._handlers[path] = self._handler(path, method.client_streaming, method.server_streaming)
        self._handlers[_LOOKUP] = grpc.unary_unary_rpc_method_handler(lookups.lookup)
        self._handlers[_WRITE] = grpc.unary_unary_rpc_method_handler(lookups.write)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        return self._handlers.get(handler_call_details.method)  # type: ignore[attr-defined]

    def _handler(self, path: str, client_streaming: bool, server_streaming: bool) -> grpc.RpcMethodHandler:
        if not server_streaming:
            if not client_streaming:
                return grpc.unary_unary_rpc_method_handler(forwarding(self._channel, path))
            many_one = self._channel.stream_unary(path)

            def stream_unary(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
                try:
                    response: bytes = many_one(
                        requests, timeout=_timeout(context), metadata=_metadata(context)
                    )
                    return response
                except grpc.RpcError as err:
                    _abort(context, err)
                    raise

            return grpc.stream_unary_rpc_method_handler(stream_unary)
        if client_streaming:
            many_many = self._channel.stream_stream(path)
            return grpc.stream_stream_rpc_method_handler(
                lambda requests, context: _relay(
                    many_many(requests, timeout=_timeout(context), metadata=_metadata(context)), context
                )
            )
        one_many = self._channel.unary_stream(path)
        return grpc.unary_stream_rpc_method_handler(
            lambda request, context: _relay(
                one_many(request, timeout=_timeout(context), metadata=_metadata(context)), context
            )
        )


def forwarding(channel: grpc.Channel, path: str) -> Callable[[bytes, Any], bytes]:
    """A unary method's handler that passes the call to the server over `channel`."""
    call = channel.unary_unary(path)

    def forward(request: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            response: bytes = call(request, timeout=_timeout(context), metadata=_metadata(context))
            return response
        except grpc.RpcError as err:
            _abort(context, err)
            raise

    return forward


def _relay(call: Any, context: grpc.ServicerContext) -> Iterator[bytes]:
    """The server's stream, until it ends or the client goes (which cancels it there)."""
    context.add_callback(call.cancel)
    try:
        yield from call
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.CANCELLED and not context.is_active():  # type: ignore[attr-defined]
            return
        _abort(context, err)


def _abort(context: grpc.ServicerContext, err: grpc.RpcError) -> None:
    context.abort(err.code(), err.details() or "")  # type: ignore[attr-defined]


def _metadata(context: grpc.ServicerContext) -> tuple[tuple[str, str | bytes], ...]:
    return tuple(
        (key, value)
        for key, value in context.invocation_metadata()
        if not key.startswith((":", "grpc-")) and key != "user-agent"
    )


def _timeout(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None or remaining > _NO_DEADLINE else max(remaining, 0.001)


def _report_reads(
    table: ReplicaTable, conn: Connection, send_lock: threading.Lock, stop: threading.Event
) -> None:
    while not stop.wait(REPORT_SECONDS):
        reads = table.take_reads()
        if reads is not None:
            try:
                with send_lock:
                    conn.send(reads)
            except OSError:
                return


def run(conn: Connection) -> None:
    """Serves until the server closes `conn`."""
    config: ReplicaConfig = conn.recv()
    sys.setswitchinterval(config.switch_interval)
    listening = listen(f"{config.host}:{config.port}", config.security, config.limits, config.threads)
    if isinstance(listening, str):
        conn.send(("failed", listening))
        return
    server, bound = listening
    channel = grpc.insecure_channel(config.upstream, options=config.limits.grpc_options())
    table = ReplicaTable()
    send_lock = threading.Lock()  # the reads' reports and the writes share the socket
    writes = ServerWrites(conn, send_lock)
    lookups = ReplicaLookups(table, config.limits, forwarding(channel, _LOOKUP), writes)
    forwarder = Forwarder(channel, lookups)
    server.add_generic_rpc_handlers((forwarder,))
    conn.send(("bound", bound))
    stop = threading.Event()
    try:
        while True:
            item = conn.recv()
            if item == "start":
                server.start()
                freeze_at_start()  # see scheduler/gc_policy.py: a hit stops for every full collection
                threading.Thread(
                    target=_report_reads, args=(table, conn, send_lock, stop), daemon=True
                ).start()
            elif isinstance(item, tuple):  # ("written", call, ok, payload)
                writes.answered(*item[1:])
            else:
                for message in item:
                    table.apply(message)
    except (EOFError, OSError):
        pass
    stop.set()
    server.stop(0)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The server decides when its replica stops (a Ctrl-C reaches the whole process group).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run(Connection(int(sys.argv[1])))
    os._exit(0)  # gRPC's threads would hold the exit up


if __name__ == "__main__":
    main()
