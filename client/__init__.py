"""The pomoview Python client: `Client` (blocking) and `AsyncClient` (asyncio)."""

from .aio import AsyncClient
from .client import Client
from .errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PomoviewError,
    Unauthenticated,
    Unavailable,
)
from .results import MissingExtra, Rows, RowsByKey
from .values import Cid

__all__ = [
    "AsyncClient",
    "Cid",
    "Client",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "MissingExtra",
    "NotFound",
    "OutOfRange",
    "PomoviewError",
    "Rows",
    "RowsByKey",
    "Unauthenticated",
    "Unavailable",
]
