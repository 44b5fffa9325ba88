"""Standard gRPC health checking and reflection answer on the server's port (DESIGN §5)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

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


def test_a_second_server_on_a_port_in_use_is_refused_at_once(
    votes_server: ServerProcess, tmp_path: Path
) -> None:
    """Without SO_REUSEPORT off, gRPC let the second server bind and take some of the first
    one's clients; the port is bound before Spark starts, so the refusal is quick."""
    port = votes_server.address.rsplit(":", 1)[1]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pomoview.server.cli", "serve", "--data", str(tmp_path / "d"),
         "--host", "127.0.0.1", "--port", port],
        capture_output=True, text=True, timeout=60,  # a second server that binds runs on
    )
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert time.monotonic() - started < 30, "refused only after Spark started"
    with votes_server.client() as db:  # the first server still answers
        assert db.describe()["relations"]
