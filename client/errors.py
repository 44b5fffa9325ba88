"""Typed client errors, one class per gRPC status code the server uses (DESIGN §5)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import grpc


class PomoviewError(Exception):
    """A failed call. `str(err)` is the server's message; `.code` its gRPC status code.

    `.metadata` holds the call's trailing metadata (text entries only), for servers that
    attach structured detail next to the message.
    """

    default_code: ClassVar[grpc.StatusCode] = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        details: str,
        code: grpc.StatusCode | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(details)
        self.details = details
        self.code = code if code is not None else self.default_code
        self.metadata = metadata if metadata is not None else {}

    def __str__(self) -> str:
        return self.details


class InvalidArgument(PomoviewError):
    """A bad program (message carries `file:line:col`), unknown attribute or ill-typed row."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(PomoviewError):
    """An unknown view or source."""

    default_code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(PomoviewError):
    """The server is not in a state to serve the call, e.g. no program installed."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(PomoviewError):
    """The server is unreachable, not ready, or Spark failed; retrying may help."""

    default_code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(PomoviewError):
    """The call outlived its timeout, e.g. waiting for `min_epoch`."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class Unauthenticated(PomoviewError):
    """The server needs a token and the call had none, or a wrong one (the message says which)."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class OutOfRange(PomoviewError):
    """A value outside what the server accepts, e.g. a `min_epoch` never issued."""

    default_code = grpc.StatusCode.OUT_OF_RANGE


class ResourceExhausted(PomoviewError):
    """A limit was reached: a subscriber fell further behind than the server's buffer (the
    message names the limit), too many open subscriptions, or a full disk."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


_BY_CODE: dict[grpc.StatusCode, type[PomoviewError]] = {
    cls.default_code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        FailedPrecondition,
        Unavailable,
        DeadlineExceeded,
        OutOfRange,
        Unauthenticated,
        ResourceExhausted,
    )
}


def _text_metadata(raw: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    """Returns text entries of gRPC metadata; binary (`-bin`) entries are skipped."""
    # Sync calls give a tuple of _Metadatum, aio calls a Metadata object; both iterate
    # as (key, value) pairs.
    return {key: value for key, value in (raw or ()) if isinstance(value, str)}


def from_rpc_error(err: grpc.RpcError) -> PomoviewError:
    """Maps a sync or asyncio `grpc.RpcError` to the matching `PomoviewError` subclass."""
    # Both grpc.Call errors and grpc.aio.AioRpcError expose code()/details(); a bare
    # RpcError (never raised by grpc itself) has neither, hence the getattr fallbacks.
    code_fn = getattr(err, "code", None)
    details_fn = getattr(err, "details", None)
    trailing_fn = getattr(err, "trailing_metadata", None)
    code = code_fn() if callable(code_fn) else grpc.StatusCode.UNKNOWN
    details = details_fn() if callable(details_fn) else None
    metadata = _text_metadata(trailing_fn() if callable(trailing_fn) else None)
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    cls = _BY_CODE.get(code, PomoviewError)
    return cls(details or code.name, code, metadata)
