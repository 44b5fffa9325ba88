"""The asyncio Python client: `Client`'s methods as coroutines, over `grpc.aio`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc
import grpc.aio

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

from . import messages
from .auth import MAX_MESSAGE_BYTES, auth_metadata, channel_credentials, channel_options
from .errors import Unavailable, from_rpc_error
from .results import Attributes, Rows, RowsByKey
from .subscription import AsyncSubscription

_Resp = TypeVar("_Resp")


class AsyncClient:
    """An asyncio connection to a pomoview server; use as `async with`.

    Create it inside the event loop that will use it (grpc.aio binds the channel to
    the running loop). Arguments and errors are as for `Client`.
    """

    def __init__(
        self,
        address: str,
        *,
        timeout: float | None = 60.0,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        tls: bool = False,
        root_certificates: bytes | None = None,
        private_key: bytes | None = None,
        certificate_chain: bytes | None = None,
        columnar: bool = True,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.address = address
        self.columnar = columnar
        self.timeout = timeout
        self._metadata = auth_metadata(token)
        # Each relation's attribute types, from the last install() or describe(): the
        # answers' to_arrow() uses them (the rows alone cannot type an empty answer).
        self._attributes: dict[str, Attributes] = {}
        creds = channel_credentials(credentials, tls, root_certificates, private_key, certificate_chain)
        options = channel_options(max_message_bytes)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(address, options=options)
        else:
            self._channel = grpc.aio.secure_channel(address, creds, options=options)
        self._stub = pb_grpc.ViewServiceStub(self._channel)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel; calls after this fail."""
        await self._channel.close()

    async def _call(self, method: Callable[..., Awaitable[_Resp]], request: Any) -> _Resp:
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err

    async def wait_ready(self, timeout: float) -> None:
        """Waits until the channel is connected; raises Unavailable after `timeout` s."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except TimeoutError:
            raise Unavailable(f"pomoview server at {self.address} not ready after {timeout}s") from None

    async def install(self, text: str, filename: str = "<program>") -> list[dict[str, object]]:
        """Installs a PomoLogic program; returns its relations as dicts."""
        resp = await self._call(self._stub.Install, messages.install_request(text, filename))
        self._attributes = messages.relation_attributes(resp.relations)
        return messages.install_result(resp)

    async def write(
        self,
        source: str,
        insert: Iterable[Mapping[str, object]] = (),
        delete: Iterable[Mapping[str, object]] = (),
    ) -> int:
        """Writes one batch over one source; returns the epoch it committed as."""
        return await self.write_batch({source: (insert, delete)})

    async def write_batch(self, changes: messages.Changes) -> int:
        """Writes one atomic batch over several sources: {source: (inserts, deletes)}."""
        req = messages.write_request(changes)
        resp: pb.WriteResponse = await self._call(self._stub.Write, req)
        return resp.epoch

    async def lookup(
        self,
        view: str,
        key: Mapping[str, object],
        min_epoch: int | None = None,
        *,
        limit: int | None = None,
        after: Mapping[str, object] | None = None,
    ) -> Rows:
        """Returns the rows of `view` matching `key`, reflecting at least `min_epoch`: a list
        of dicts, with `to_arrow()` and `to_pandas()`.

        On a view declared with `order by`, a page: at most `limit` rows after the row
        `after` in the view's order (a dict with at least the order attributes; the last row
        of the previous page works as it is). Pages read with one `min_epoch` neither skip
        nor repeat a row."""
        resp = await self._lookup(view, [key], min_epoch, limit, after)
        return messages.lookup_rows(resp, 1, self._attributes.get(view))[0]

    async def lookup_many(
        self,
        view: str,
        keys: Sequence[Mapping[str, object]],
        min_epoch: int | None = None,
        *,
        limit: int | None = None,
        after: Mapping[str, object] | None = None,
    ) -> RowsByKey:
        """Returns the rows of `view` matching each key, reflecting at least `min_epoch`, in
        one call: a dict from the key's values to its rows, with `to_arrow()` and
        `to_pandas()` over all rows.

        A dict key is the tuple of a key's values in the order of the first key's
        attributes, even for one attribute: `{"id": 3}` is `(3,)`. The entries are in the
        order the keys were first asked; a key asked twice is there once. Keys must name
        the same attributes: one that does not raises InvalidArgument before sending.
        `limit` and `after` page each key's rows, as for `lookup`.
        """
        attributes = self._attributes.get(view)
        if not keys:
            # The keys' attributes select the reader; with none there is nothing to ask.
            return messages.lookup_result(pb.LookupResponse(), [], attributes)
        tuples = messages.key_tuples(keys)
        return messages.lookup_result(
            await self._lookup(view, keys, min_epoch, limit, after), tuples, attributes
        )

    async def _lookup(
        self,
        view: str,
        keys: Sequence[Mapping[str, object]],
        min_epoch: int | None,
        limit: int | None = None,
        after: Mapping[str, object] | None = None,
    ) -> pb.LookupResponse:
        """As `Client`'s: columns if the server has them, else rows from then on."""
        req = messages.lookup_request(view, keys, min_epoch, self.columnar, limit, after)
        resp: pb.LookupResponse = await self._call(self._stub.Lookup, req)
        if not messages.is_answer_of(resp, req):
            self.columnar = False
            resp = await self._call(
                self._stub.Lookup, messages.lookup_request(view, keys, min_epoch, False, limit, after)
            )
        return resp

    def subscribe(self, view: str, keys: Sequence[Mapping[str, object]]) -> AsyncSubscription:
        """`Client.subscribe`, as an async iterator: `async for change in db.subscribe(...)`;
        `close()` (or an `async with` block) cancels it. Not a coroutine: it returns the
        iterator at once, and errors raise from the iteration."""
        call = self._stub.Subscribe(messages.subscribe_request(view, keys), metadata=self._metadata)
        return AsyncSubscription(call, self._attributes.get(view))

    async def describe(self, view: str | None = None) -> dict[str, object]:
        """Returns {program, relations, nodes} of the installed program; `nodes` is the
        dataflow graph of `view` built so far (inputs first), empty without a view or
        before its first lookup: a dict per operator of DataflowNode's fields (id, operator,
        detail, inputs, stateful, key, partial, present_keys, rows, bytes, ..., unmeasured)."""
        resp = await self._call(self._stub.Describe, pb.DescribeRequest(view=view or ""))
        self._attributes = messages.relation_attributes(resp.relations)
        return messages.describe_result(resp)

    async def evict(
        self, view: str | None = None, keys: Sequence[Mapping[str, object]] | None = None
    ) -> dict[str, int]:
        """Drops the cached state of `keys` of `view` (None: every key of the view; no view:
        every key of every partial state); see `Client.evict`."""
        request = messages.evict_request(view, keys)
        return messages.evict_result(await self._call(self._stub.Evict, request))

    async def stats(self) -> dict[str, object]:
        """Returns the server's counters and readers (see `StatsResponse`)."""
        return messages.stats_result(await self._call(self._stub.Stats, pb.StatsRequest()))

    async def load(
        self,
        source: str,
        path: str | os.PathLike[str],
        format: str | None = None,
        options: Mapping[str, str] | None = None,
        progress: messages.ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> tuple[int, int]:
        """Bulk-imports a file into `source` as one epoch; returns (rows, epoch). As
        `Client.load`; `progress` is a plain function, called on the event loop."""
        request = messages.load_request(source, path, format, options)
        call = self._stub.Load(request, timeout=timeout, metadata=self._metadata)
        try:
            async for msg in call:
                if msg.HasField("done"):
                    return msg.done.rows, msg.done.epoch
                if progress is not None:
                    progress(messages.load_progress(msg.progress))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err
        finally:
            call.cancel()  # a no-op once done; else (an interrupt) it stops the server's jobs
        raise messages.unfinished_load()
