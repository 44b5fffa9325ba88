"""The fake server's fixtures, shared by the client tests; fake_server.py is made importable."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from fake_server import FakeViewService  # noqa: E402


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, FakeViewService]]:
    fake = FakeViewService()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_ViewServiceServicer_to_server(fake, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield f"127.0.0.1:{port}", fake
    finally:
        srv.stop(None)


@pytest.fixture()
def address(server: tuple[str, FakeViewService]) -> str:
    return server[0]


@pytest.fixture()
def fake(server: tuple[str, FakeViewService]) -> FakeViewService:
    server[1].requests.clear()
    return server[1]


@pytest.fixture()
def dead_address() -> str:
    # A port that was free a moment ago; nothing listens on it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"
