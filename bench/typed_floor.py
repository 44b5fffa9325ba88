"""The typed-message floor of bench/hits_under_load.py: a minimal gRPC dict server whose rows
are typed messages `Row{id, title, votes}`, on the same kind of thread pool as `pomoview
serve`; what a Python gRPC server answering the vote view costs at the least.

    .venv/bin/python bench/typed_floor.py ROWS.json

ROWS.json is a list of [id, title, votes]. Prints `floor listening on HOST:PORT`.

Its messages are built at run time with protobuf's descriptor API (no generated code), from
this schema:

    message Keys    { repeated int64 ids = 1; }
    message Row     { int64 id = 1; string title = 2; int64 votes = 3; }
    message KeyRows { repeated Row rows = 1; }
    message Rows    { repeated KeyRows results = 1; }   // one per asked id, in order
    service Floor   { rpc Lookup(Keys) returns (Rows); }

`FloorClient.lookup_many(ids)` is the equivalent of `Client.lookup_many`: it returns the same
dict of `(id,)` -> list of row dicts.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

METHOD = "/floor.Floor/Lookup"
_F = descriptor_pb2.FieldDescriptorProto


def _messages() -> dict[str, Any]:
    """The four message classes, from a FileDescriptorProto in a pool of their own."""
    proto = descriptor_pb2.FileDescriptorProto(name="floor.proto", package="floor", syntax="proto3")
    schema: dict[str, list[tuple[str, int, int, str]]] = {
        # message: [(field, type, label, message type name)]
        "Keys": [("ids", _F.TYPE_INT64, _F.LABEL_REPEATED, "")],
        "Row": [
            ("id", _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
            ("title", _F.TYPE_STRING, _F.LABEL_OPTIONAL, ""),
            ("votes", _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ],
        "KeyRows": [("rows", _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".floor.Row")],
        "Rows": [("results", _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".floor.KeyRows")],
    }
    for name, fields in schema.items():
        message = proto.message_type.add(name=name)
        for number, (field, kind, label, type_name) in enumerate(fields, start=1):
            added = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:  # set only for message fields (its presence is checked)
                added.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"floor.{name}")) for name in schema
    }


M = _messages()


class FloorClient:
    """A channel to the floor; `lookup_many` returns what `Client.lookup_many` would."""

    def __init__(self, address: str, timeout: float = 60.0) -> None:
        self.channel = grpc.insecure_channel(address)
        self.timeout = timeout
        self._lookup = self.channel.unary_unary(
            METHOD, request_serializer=M["Keys"].SerializeToString, response_deserializer=M["Rows"].FromString
        )

    def wait_ready(self, timeout: float) -> None:
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def lookup_many(self, ids: list[int]) -> dict[tuple[int], list[dict[str, object]]]:
        resp = self._lookup(M["Keys"](ids=ids), timeout=self.timeout)
        out: dict[tuple[int], list[dict[str, object]]] = {}
        for i, kr in zip(ids, resp.results, strict=True):
            if (i,) not in out:
                out[(i,)] = [{"id": r.id, "title": r.title, "votes": r.votes} for r in kr.rows]
        return out

    def close(self) -> None:
        self.channel.close()


def main() -> None:
    data = json.loads(open(sys.argv[1]).read())
    rows = {i: M["KeyRows"](rows=[M["Row"](id=i, title=t, votes=n)]) for i, t, n in data}
    empty = M["KeyRows"]()

    def lookup(request: Any, context: grpc.ServicerContext) -> Any:
        return M["Rows"](results=[rows.get(i, empty) for i in request.ids])

    handler = grpc.method_handlers_generic_handler(
        "floor.Floor",
        {
            "Lookup": grpc.unary_unary_rpc_method_handler(
                lookup,
                request_deserializer=M["Keys"].FromString,
                response_serializer=M["Rows"].SerializeToString,
            )
        },
    )
    # As wide as pomoview's pool (server/api/app.py GRPC_THREADS), as bench/vote_echo.py.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=256, thread_name_prefix="grpc"))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"floor listening on 127.0.0.1:{port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
