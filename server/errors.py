"""Errors the server's core raises; the gRPC layer maps each to its status code."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the server refuses; `code` names a grpc.StatusCode member."""

    code = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(ServiceError):
    code = "INVALID_ARGUMENT"


class NotFound(ServiceError):
    code = "NOT_FOUND"


class FailedPrecondition(ServiceError):
    code = "FAILED_PRECONDITION"


class OutOfRange(ServiceError):
    code = "OUT_OF_RANGE"


class Unavailable(ServiceError):
    code = "UNAVAILABLE"


class Unimplemented(ServiceError):
    code = "UNIMPLEMENTED"


class DeadlineExceeded(ServiceError):
    code = "DEADLINE_EXCEEDED"


class ResourceExhausted(ServiceError):
    code = "RESOURCE_EXHAUSTED"
