"""Token, TLS and channel options shared by `Client` and `AsyncClient`."""

from __future__ import annotations

import grpc

# gRPC metadata values must be printable ASCII; a token outside it would fail deep inside
# grpc with an unhelpful error, so it is refused up front.
_PRINTABLE = frozenset(range(0x21, 0x7F))

# The largest message a client receives or sends unless told otherwise: the server's default
# limit (`serve --max-message-bytes`, server/limits/requests.py). grpc's own is 4 MiB, so a
# whole view's answer of 10 MB, which the server sends, failed in the client.
MAX_MESSAGE_BYTES = 64 << 20


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


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """The channel's message size limits, both ways; ValueError unless a positive int."""
    if type(max_message_bytes) is not int or max_message_bytes <= 0:
        raise ValueError(f"max_message_bytes must be a positive number of bytes, got {max_message_bytes!r}")
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
    ]
