"""Authentication and TLS for `pomoview serve`: a bearer token checked on every call but
health checks, server certificates, optional client certificates, and the refusal to expose
an unauthenticated server beyond loopback.

Imports only the standard library, grpc and `pomoview.client` (the CLI's client commands
read tokens with it on a client-only install).
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from pomoview.client.auth import check_token

log = logging.getLogger("pomoview.security")

TOKEN_ENV = "POMOVIEW_TOKEN"
# Load balancers and orchestrators probe health without credentials.
UNAUTHENTICATED_SERVICES = ("/grpc.health.v1.Health/",)


class SecurityConfigError(Exception):
    """Auth or TLS settings the server or client cannot start with; the message says why."""


def read_token_file(path: str | Path) -> str:
    """The token in `path`, without surrounding whitespace (files end with a newline)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SecurityConfigError(f"cannot read the token file {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        # Not the decoder's message: it quotes the offending byte of the secret.
        raise SecurityConfigError(f"the token file {path} is not UTF-8 text") from None
    try:
        return check_token(text.strip(), f"the token in {path}")
    except ValueError as err:
        raise SecurityConfigError(str(err)) from None


def resolve_token(token_file: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The token and where it came from: `--token-file` wins over `POMOVIEW_TOKEN` (the token
    itself); an empty variable counts as unset. (None, "none") without either."""
    if token_file:
        return read_token_file(token_file), "flag --token-file"
    if environ.get(TOKEN_ENV):
        try:
            return check_token(environ[TOKEN_ENV].strip(), TOKEN_ENV), f"env {TOKEN_ENV}"
        except ValueError as err:
            raise SecurityConfigError(str(err)) from None
    return None, "none"


def read_pem(path: str, what: str, label: str) -> bytes:
    """The PEM file at `path`, which must hold a block whose label ends in `label`. grpc
    only finds a bad file at the first handshake, with a log line no caller sees."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise SecurityConfigError(f"cannot read the {what} {path}: {err.strerror}") from None
    if not re.search(rf"-----BEGIN [A-Z0-9 ]*{label}-----".encode(), data):
        raise SecurityConfigError(f"{path} is not a PEM {what} (no '-----BEGIN ...{label}-----' line)")
    return data


def is_loopback(host: str) -> bool:
    """Whether `host` can only be reached from this machine: 127.0.0.0/8, ::1, localhost."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another name: it may resolve to anything


@dataclass(frozen=True)
class ServerSecurity:
    """A server's auth and TLS settings; the default is a plaintext server without a token."""

    token: str | None = None
    token_origin: str = "none"
    cert: bytes | None = None
    key: bytes | None = None
    client_ca: bytes | None = None
    # Where the PEM files came from, for the configuration log line.
    tls_detail: str = ""
    insecure: bool = False

    @property
    def mutual_tls(self) -> bool:
        return self.client_ca is not None

    def check_host(self, host: str) -> None:
        """Refuses to expose a server no caller has to authenticate to beyond loopback."""
        if is_loopback(host) or self.token is not None or self.mutual_tls or self.insecure:
            return
        raise SecurityConfigError(
            f"refusing to listen on {host} without a token: anyone who can reach it could read "
            f"and write every view. Give a token with --token-file FILE or {TOKEN_ENV}, listen "
            "on 127.0.0.1, or pass --insecure to serve without authentication"
        )

    def describe(self) -> dict[str, str]:
        """`auth` and `tls` for the configuration log line; never the token itself."""
        if self.token is not None:
            auth = f"bearer token ({self.token_origin})"
        elif self.mutual_tls:
            auth = "client certificate"
        else:
            auth = "none (--insecure)" if self.insecure else "none"
        if self.cert is None:
            tls = "off"
        else:
            tls = "mutual" if self.mutual_tls else "on"
            tls += f" ({self.tls_detail})" if self.tls_detail else ""
        return {"auth": auth, "tls": tls}

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if self.cert is None or self.key is None:
            return None
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )

    def interceptors(self) -> list[grpc.ServerInterceptor]:
        return [] if self.token is None else [TokenInterceptor(self.token)]


def server_security(
    *,
    token_file: str | None,
    tls_cert: tuple[str, str],
    tls_key: tuple[str, str],
    tls_client_ca: tuple[str, str],
    insecure: bool,
    environ: Mapping[str, str],
) -> ServerSecurity:
    """Reads the token and PEM files `serve` was given. Each TLS setting is (path, origin),
    path "" when unset, as `resolve_serve_config` returns them."""
    token, token_origin = resolve_token(token_file, environ)
    (cert_path, cert_origin), (key_path, key_origin), (ca_path, ca_origin) = tls_cert, tls_key, tls_client_ca
    if bool(cert_path) != bool(key_path):
        raise SecurityConfigError("TLS needs both --tls-cert and --tls-key")
    if ca_path and not cert_path:
        raise SecurityConfigError("--tls-client-ca needs TLS: give --tls-cert and --tls-key too")
    if not cert_path:
        return ServerSecurity(token=token, token_origin=token_origin, insecure=insecure)
    detail = [f"cert {cert_path} ({cert_origin})", f"key {key_path} ({key_origin})"]
    if ca_path:
        detail.append(f"client CA {ca_path} ({ca_origin})")
    return ServerSecurity(
        token=token,
        token_origin=token_origin,
        cert=read_pem(cert_path, "certificate", "CERTIFICATE"),
        key=read_pem(key_path, "private key", "PRIVATE KEY"),  # also RSA, EC ... PRIVATE KEY
        client_ca=read_pem(ca_path, "client CA certificate", "CERTIFICATE") if ca_path else None,
        tls_detail=", ".join(detail),
        insecure=insecure,
    )


def _rejecting_handler(
    handler: grpc.RpcMethodHandler | None, message: str
) -> grpc.RpcMethodHandler:
    """A handler that ends the call with UNAUTHENTICATED, of the same kind as `handler` so
    grpc reads the request the way the client sends it."""

    def reject(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    make: Callable[..., grpc.RpcMethodHandler] = grpc.unary_unary_rpc_method_handler
    if handler is not None:
        if handler.request_streaming and handler.response_streaming:
            make = grpc.stream_stream_rpc_method_handler
        elif handler.request_streaming:
            make = grpc.stream_unary_rpc_method_handler
        elif handler.response_streaming:
            make = grpc.unary_stream_rpc_method_handler
    return make(reject)


class TokenInterceptor(grpc.ServerInterceptor):
    """Lets a call through only with `authorization: Bearer <token>`, health checks always.

    An accepted call gets the registered handler itself, untouched: Lookup's handler
    serializes pre-encoded bytes (service.add_view_service), which a wrapper would have to
    keep doing. grpc runs this under its server lock, so it does no I/O but a log line.
    """

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method  # type: ignore[attr-defined]
        if method.startswith(UNAUTHENTICATED_SERVICES):
            return continuation(handler_call_details)
        metadata = handler_call_details.invocation_metadata  # type: ignore[attr-defined]
        given = [v for k, v in metadata or () if k == "authorization"]
        if not given:
            message = "missing token: this server needs the metadata 'authorization: Bearer <token>'"
        else:
            value = given[0] if isinstance(given[0], bytes) else given[0].encode()
            # Constant time, so the comparison's duration does not tell how much of a guess matched.
            if len(given) == 1 and hmac.compare_digest(value, self._expected):
                return continuation(handler_call_details)
            if len(given) > 1:
                message = "more than one authorization metadata entry"
            elif not value.lower().startswith(b"bearer "):
                message = "malformed authorization metadata: expected 'Bearer <token>'"
            else:
                message = "wrong token: the bearer token does not match this server's"
        log.warning("rejected %s: %s", method, message.split(":")[0])
        return _rejecting_handler(continuation(handler_call_details), message)


def client_options(token_file: str | None, tls_ca: str | None, environ: Mapping[str, str]) -> dict[str, Any]:
    """`Client` keyword arguments for the CLI's client commands: the token (`--token-file`,
    else `POMOVIEW_TOKEN`) and, with `--tls-ca`, TLS verified against that root."""
    token, _origin = resolve_token(token_file, environ)
    options: dict[str, Any] = {"token": token}
    if tls_ca:
        options["root_certificates"] = read_pem(tls_ca, "CA certificate", "CERTIFICATE")
    return options


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    """The client commands' token and TLS flags; defaults read the environment now."""
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help=f"file holding the server's token (else env {TOKEN_ENV}, the token itself)",
    )
    parser.add_argument(
        "--tls-ca",
        default=os.environ.get("POMOVIEW_TLS_CA") or None,
        metavar="FILE",
        help="connect with TLS, trusting the server certificate this CA (PEM) signed "
        "(env POMOVIEW_TLS_CA; default plaintext)",
    )


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """`serve`'s token and TLS flags. Those with a variable in cli.SERVE_ENV default to None,
    for resolve_serve_config to fill in."""
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="require every call but health checks to carry 'authorization: Bearer TOKEN', "
        f"TOKEN being this file's content (env {TOKEN_ENV}: the token itself; default no token, "
        "allowed only on a loopback --host)",
    )
    parser.add_argument(
        "--tls-cert",
        default=None,
        metavar="PEM",
        help="serve TLS with this certificate (chain); needs --tls-key (env POMOVIEW_TLS_CERT, "
        "default plaintext)",
    )
    parser.add_argument(
        "--tls-key",
        default=None,
        metavar="PEM",
        help="the private key of --tls-cert (env POMOVIEW_TLS_KEY)",
    )
    parser.add_argument(
        "--tls-client-ca",
        default=None,
        metavar="PEM",
        help="mutual TLS: require client certificates signed by this CA (env POMOVIEW_TLS_CLIENT_CA, "
        "default none asked for)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow a --host other than loopback (127.0.0.0/8, ::1, localhost) without a token "
        "or client certificates: anyone who can reach the port can read and write",
    )
