"""Token and TLS options shared by `Client` and `AsyncClient`."""

from __future__ import annotations

import grpc

# gRPC metadata values must be printable ASCII; a token outside it would fail deep inside
# grpc with an unhelpful error, so it is refused up front.
_PRINTABLE = frozenset(range(0x21, 0x7F))


def check_token(token: str, where: str = "token") -> str:
    """Returns `token` if it can travel as `authorization: Bearer <token>`; else ValueError.
    The message never contains the token."""
    if not token:
        raise ValueError(f"{where} is empty")
    if any(ord(c) not in _PRINTABLE for c in token):
        raise ValueError(f"{where} must be printable ASCII without spaces")
    return token


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """The metadata sent with every call. Call credentials are not used: grpc sends them
    only over TLS, and a token over plaintext to a loopback server is a supported setup."""
    if token is None:
        return None
    return (("authorization", f"Bearer {check_token(token)}"),)


def channel_credentials(
    credentials: grpc.ChannelCredentials | None,
    tls: bool,
    root_certificates: bytes | None,
    private_key: bytes | None,
    certificate_chain: bytes | None,
) -> grpc.ChannelCredentials | None:
    """The channel's credentials: `credentials` as given, else TLS built from the PEM
    options (any of them implies TLS; no root certificates means the system's), else None
    for plaintext."""
    pem_given = root_certificates is not None or private_key is not None or certificate_chain is not None
    if credentials is not None:
        if tls or pem_given:
            raise ValueError("give either credentials= or tls=/root_certificates=/..., not both")
        return credentials
    if (private_key is None) != (certificate_chain is None):
        raise ValueError("a client certificate needs both private_key= and certificate_chain=")
    if not (tls or pem_given):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=root_certificates,
        private_key=private_key,
        certificate_chain=certificate_chain,
    )
