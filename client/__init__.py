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
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from .results import MissingExtra, Rows, RowsByKey
from .subscription import AsyncSubscription, Change, Subscription
from .values import Cid

__all__ = [
    "AsyncClient",
    "AsyncSubscription",
    "Change",
    "Cid",
    "Client",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "MissingExtra",
    "NotFound",
    "OutOfRange",
    "PomoviewError",
    "ResourceExhausted",
    "Rows",
    "RowsByKey",
    "Subscription",
    "Unauthenticated",
    "Unavailable",
]
