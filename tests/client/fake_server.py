"""A fake pomoview server for the client tests: a real in-process gRPC server whose servicer
is a test double. It records requests and returns canned answers, aborting with specific
status codes for specific inputs."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc

from pomoview.client.values import columns_to_rows, dict_to_row, row_to_dict, rows_to_columns
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

RELATIONS = [
    pb.Relation(
        name="vote",
        kind="source",
        attributes=[
            pb.Attribute(name="article_id", type="int"),
            pb.Attribute(name="user_id", type="int"),
        ],
    ),
    pb.Relation(
        name="articleWithVotes",
        kind="derived",
        is_view=True,
        key=["id"],
        attributes=[
            pb.Attribute(name="id", type="int"),
            pb.Attribute(name="title", type="string"),
            pb.Attribute(name="votes", type="int"),
        ],
    ),
]

# view name -> (status code, message) the fake aborts Lookup with.
LOOKUP_ABORTS = {
    "missing": (grpc.StatusCode.NOT_FOUND, "unknown view 'missing'"),
    "spark": (grpc.StatusCode.UNAVAILABLE, "spark job failed"),
    "noprogram": (grpc.StatusCode.FAILED_PRECONDITION, "no program installed"),
    "future": (grpc.StatusCode.OUT_OF_RANGE, "min_epoch 99 was never issued"),
    "internal": (grpc.StatusCode.INTERNAL, "boom"),
}


def request_keys(request: pb.LookupRequest) -> list[dict[str, Any]]:
    """A lookup's keys as dicts, from whichever form they were sent in."""
    if request.HasField("key_columns"):
        return columns_to_rows(request.key_columns)
    return [row_to_dict(k) for k in request.keys]


class FakeViewService(pb_grpc.ViewServiceServicer):
    """Records every request; answers Lookup with two rows per key built from the key, in
    columns when asked (unless `columnar` is False: then it answers as a server that
    predates columnar answers, which sees only keys sent as rows)."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.epoch = 0
        self.columnar = True
        self._lock = threading.Lock()

    def _record(self, request: Any) -> None:
        with self._lock:
            self.requests.append(request)

    def Install(self, request: pb.InstallRequest, context: grpc.ServicerContext) -> Any:
        self._record(request)
        if "syntax error" in request.program:
            context.set_trailing_metadata([("pomoview-position", f"{request.filename}:1:5")])
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{request.filename}:1:5: unexpected token"
            )
        return pb.InstallResponse(relations=RELATIONS)

    def Write(self, request: pb.WriteRequest, context: grpc.ServicerContext) -> Any:
        self._record(request)
        for ch in request.changes:
            if ch.source == "nosuch":
                context.abort(grpc.StatusCode.NOT_FOUND, "unknown source 'nosuch'")
        with self._lock:
            self.epoch += 1
            return pb.WriteResponse(epoch=self.epoch)

    def Lookup(self, request: pb.LookupRequest, context: grpc.ServicerContext) -> Any:
        self._record(request)
        if request.view in LOOKUP_ABORTS:
            context.abort(*LOOKUP_ABORTS[request.view])
        if request.view == "slow":
            time.sleep(1.0)
        keys = request_keys(request) if self.columnar else [row_to_dict(k) for k in request.keys]
        answers = [[{**base, "votes": 2, "title": "b"}, {**base, "votes": 1, "title": "a"}] for base in keys]
        if request.view == "short":
            answers = answers[:-1]
        if request.columnar and self.columnar:
            columns = rows_to_columns([row for rows in answers for row in rows])
            counts = [len(rows) for rows in answers]
            return pb.LookupResponse(columns=columns, row_counts=counts, epoch=self.epoch)
        results = [pb.KeyRows(rows=[dict_to_row(r) for r in rows]) for rows in answers]
        return pb.LookupResponse(results=results, epoch=self.epoch)

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> Any:
        self._record(request)
        return pb.DescribeResponse(program="source vote(...).", relations=RELATIONS)

    def Stats(self, request: pb.StatsRequest, context: grpc.ServicerContext) -> Any:
        self._record(request)
        return pb.StatsResponse(
            applied_epoch=5,
            durable_epoch=6,
            flushed_epoch=3,
            upqueries=2,
            spark_jobs=1,
            dropped_deltas=4,
            memory_budget=64 << 20,
            rss_bytes=90 << 20,
            baseline_rss_bytes=40 << 20,
            partial_state_bytes=30 << 20,
            eviction_rounds=3,
            apply_lag_seconds=0.125,
            apply_lag_epochs=7,
            replica_hits=9,
            states_epoch=4,
            spark_executors=0,
            spark_status="the Spark cluster spark://h:7077 has had no executor for this server for 4 s",
            readers=[
                pb.ReaderStats(view="articleWithVotes", key=["id"], partial=True, present_keys=10)
            ],
            states=[
                pb.DataflowNode(id="n0", operator="SourceIndex", detail="SourceIndex(vote by (article_id,))",
                                stateful=True, key=["article_id"], partial=True, present_keys=10, rows=31,
                                bytes=4096, dropped=7, upqueries=10, views=["articleWithVotes"]),
                pb.DataflowNode(id="n1", operator="Map", detail="Map", inputs=["n0"]),
            ],
        )
