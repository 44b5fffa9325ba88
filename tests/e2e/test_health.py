"""Standard gRPC health checking and reflection answer on the server's port (DESIGN §5)."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from .server_process import ServerProcess


def test_health_reports_serving(votes_server: ServerProcess) -> None:
    with grpc.insecure_channel(votes_server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "pomoview.v1.ViewService"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        try:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.NOT_FOUND
        else:
            raise AssertionError("an unknown service must not be reported healthy")


def test_reflection_lists_the_view_service(votes_server: ServerProcess) -> None:
    with grpc.insecure_channel(votes_server.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        replies = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
        names = {s.name for s in replies[0].list_services_response.service}
        assert "pomoview.v1.ViewService" in names
        assert "grpc.health.v1.Health" in names
