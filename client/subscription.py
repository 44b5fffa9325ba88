"""Subscriptions: `Client.subscribe` and `AsyncClient.subscribe` return an iterator of
`Change`s over one `Subscribe` stream; closing it (or leaving its `with` block, or breaking
out of a `for` over it once nothing else holds it) cancels the stream on the server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

from .errors import from_rpc_error
from .results import Attributes, Rows
from .values import row_to_dict


@dataclass(frozen=True)
class Change:
    """One item of a subscription.

    The first item is the snapshot (`snapshot` is True): the subscribed keys' rows at
    `epoch`, all in `inserts` (`deletes` is empty). Each later item is what changed in
    those rows at one later `epoch` (epochs only increase; one that changed none of them is
    not sent): rows that appeared in `inserts`, rows that went away in `deletes`. A row
    that changes (an article retitled, a count that moves) is a delete of the old row and
    an insert of the new one in the same item. The snapshot with every later item applied
    in order is the keys' rows at the last item's epoch. (A view that reads the server's
    own state, `pomoview_state` and the other built-in sources, changes between epochs as
    well, at most once a second: its items may repeat an epoch. So may a recursive view's,
    when a write made its key reach rows the server had not fetched: they follow in an
    item of their own at that epoch, once fetched.)
    """

    epoch: int
    inserts: Rows
    deletes: Rows
    snapshot: bool = False


def _rows(rows: Any, attributes: Attributes | None) -> Rows:
    out = Rows([row_to_dict(r) for r in rows])
    if attributes is not None:
        out.attributes = attributes
    return out


def change(update: pb.SubscribeUpdate, attributes: Attributes | None) -> Change:
    return Change(
        epoch=update.epoch,
        inserts=_rows(update.inserts, attributes),
        deletes=_rows(update.deletes, attributes),
        snapshot=update.snapshot,
    )


class _Stream:
    """What both kinds of subscription hold: the call, the attribute types of the view, and
    whether it was closed; `close()` cancels the call (idempotent)."""

    def __init__(self, call: Any, attributes: Attributes | None) -> None:
        self._call = call
        self._attributes = attributes
        self._closed = False

    def close(self) -> None:
        """Cancels the stream (idempotent); the server releases the keys."""
        self._closed = True
        self._call.cancel()


class Subscription(_Stream, Iterator[Change]):
    """The `Change`s of one subscription, blocking for each (`Client.subscribe`). A failed
    stream raises its `PomoviewError` from `next()`: `NotFound` for an unknown view,
    `ResourceExhausted` when this subscriber fell behind the server's buffer, `Unavailable`
    when the server rebuilt its dataflow (subscribe again). After `close()` the iteration
    ends quietly."""

    def __iter__(self) -> Subscription:
        return self

    def __next__(self) -> Change:
        if self._closed:
            raise StopIteration
        try:
            update = next(self._call)
        except grpc.RpcError as err:
            if self._closed:
                raise StopIteration from None
            self._closed = True
            raise from_rpc_error(err) from err
        return change(update, self._attributes)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._closed:
            self.close()


class AsyncSubscription(_Stream, AsyncIterator[Change]):
    """`Subscription` for asyncio (`AsyncClient.subscribe`): `async for change in sub`, and
    `async with` or `close()` to cancel."""

    def __aiter__(self) -> AsyncSubscription:
        return self

    async def __anext__(self) -> Change:
        if self._closed:
            raise StopAsyncIteration
        try:
            update = await self._call.read()
        except grpc.RpcError as err:
            if self._closed:
                raise StopAsyncIteration from None
            self._closed = True
            raise from_rpc_error(err) from err
        except BaseException:
            if self._closed:  # grpc.aio raises CancelledError into a read that a cancel ended
                raise StopAsyncIteration from None
            raise
        if update is grpc.aio.EOF:
            self._closed = True
            raise StopAsyncIteration
        return change(update, self._attributes)

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not self._closed:
            try:
                self.close()
            except Exception:  # noqa: S110 (the event loop may be gone at collection)
                pass
