"""The hit-read peer of bench/vote.py: a gRPC server with pomoview's Lookup RPC over a plain
dict of id -> Row protos, on the same kind of thread pool as `pomoview serve`.

    .venv/bin/python bench/vote_echo.py ROWS.json

ROWS.json is a list of [id, title, votes]. Prints `echo listening on HOST:PORT`.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures

import grpc

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc


class Echo(pb_grpc.ViewServiceServicer):
    def __init__(self, rows: dict[int, list[pb.Row]]) -> None:
        self.rows = rows

    def Lookup(self, request: pb.LookupRequest, context: grpc.ServicerContext) -> pb.LookupResponse:
        rows = self.rows
        return pb.LookupResponse(
            results=[pb.KeyRows(rows=rows.get(k.fields["id"].int_value, [])) for k in request.keys],
            epoch=1,
        )


def main() -> None:
    data = json.loads(open(sys.argv[1]).read())
    rows = {
        i: [
            pb.Row(
                fields={
                    "id": pb.Value(int_value=i),
                    "title": pb.Value(string_value=t),
                    "votes": pb.Value(int_value=n),
                }
            )
        ]
        for i, t, n in data
    }
    # As wide as pomoview's pool (server/api/app.py GRPC_THREADS).
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=256, thread_name_prefix="grpc"))
    pb_grpc.add_ViewServiceServicer_to_server(Echo(rows), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"echo listening on 127.0.0.1:{port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
