"""A gRPC server bound to its address, as the server and its hit replica both make one."""

from __future__ import annotations

from concurrent import futures

import grpc

from pomoview.server.api.security import ServerSecurity
from pomoview.server.limits.requests import Limits


def listen(
    address: str, security: ServerSecurity, limits: Limits, threads: int
) -> tuple[grpc.Server, int] | str:
    """A gRPC server (not started) bound to `address` with `security`'s TLS and token and
    `limits`' message sizes, and its port; or why it cannot listen there."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
        interceptors=security.interceptors(),
        # gRPC sets SO_REUSEPORT by default: a second server on a port in use would bind
        # without error and share the clients with the first (seen with two `serve`s on 7878).
        options=[*limits.grpc_options(), ("grpc.so_reuseport", 0)],
    )
    credentials = security.server_credentials()
    try:
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError:  # grpc raises where it used to return 0
        bound = 0
    if bound == 0:
        # grpc checks the key against the certificate only here, with nothing but "failed to bind".
        hint = " (is --tls-key the private key of --tls-cert?)" if credentials is not None else ""
        return f"cannot listen on {address}{hint}"
    return server, bound
