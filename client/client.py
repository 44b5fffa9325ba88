"""The blocking Python client (DESIGN §5)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc

from . import messages
from .auth import MAX_MESSAGE_BYTES, auth_metadata, channel_credentials, channel_options
from .errors import Unavailable, from_rpc_error
from .results import Attributes, Rows, RowsByKey
from .subscription import Subscription

_Resp = TypeVar("_Resp")


class Client:
    """A connection to a pomoview server; use as a context manager to close it.

    `timeout` is the per-call deadline in seconds (None: wait forever). Every RPC
    failure is raised as a `PomoviewError` subclass chosen by its status code.

    `token` is sent on every call as `authorization: Bearer <token>` (a server started with
    a token answers calls without it with `Unauthenticated`). `tls=True` makes the channel
    TLS, verified against the system's roots or `root_certificates` (PEM bytes, which imply
    TLS); `private_key` and `certificate_chain` (PEM) add a client certificate, for a
    server that requires one. `credentials` (a ready `grpc.ChannelCredentials`) is the
    alternative to those TLS options.

    `columnar` (the default): lookups send their keys and get their answers as typed columns,
    much cheaper to encode and decode than a message per value; the rows are the same. A
    server that predates columnar answers is asked again in rows, and in rows from then on.
    `columnar=False` asks in rows always.

    `max_message_bytes` bounds each message received or sent (default 64 MiB, the server's
    own default limit, where grpc's is 4 MiB): a whole view's answer past it fails with
    `ResourceExhausted`. A server started with a larger `--max-message-bytes` needs a
    client with as large a one for answers that large.
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
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            self._channel = grpc.secure_channel(address, creds, options=options)
        self._stub = pb_grpc.ViewServiceStub(self._channel)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel; calls after this fail."""
        self._channel.close()

    def _call(self, method: Callable[..., _Resp], request: Any) -> _Resp:
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err

    def wait_ready(self, timeout: float) -> None:
        """Blocks until the channel is connected; raises Unavailable after `timeout` s."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise Unavailable(f"pomoview server at {self.address} not ready after {timeout}s") from None

    def install(self, text: str, filename: str = "<program>") -> list[dict[str, object]]:
        """Installs a PomoLogic program; returns its relations as dicts
        {name, kind, is_view, key, attributes: [{name, type}]}."""
        resp = self._call(self._stub.Install, messages.install_request(text, filename))
        self._attributes = messages.relation_attributes(resp.relations)
        return messages.install_result(resp)

    def write(
        self,
        source: str,
        insert: Iterable[Mapping[str, object]] = (),
        delete: Iterable[Mapping[str, object]] = (),
    ) -> int:
        """Writes one batch over one source; returns the epoch it committed as."""
        return self.write_batch({source: (insert, delete)})

    def write_batch(self, changes: messages.Changes) -> int:
        """Writes one atomic batch over several sources: {source: (inserts, deletes)}."""
        resp: pb.WriteResponse = self._call(self._stub.Write, messages.write_request(changes))
        return resp.epoch

    def lookup(
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
        resp = self._lookup(view, [key], min_epoch, limit, after)
        return messages.lookup_rows(resp, 1, self._attributes.get(view))[0]

    def lookup_many(
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
        return messages.lookup_result(self._lookup(view, keys, min_epoch, limit, after), tuples, attributes)

    def _lookup(
        self,
        view: str,
        keys: Sequence[Mapping[str, object]],
        min_epoch: int | None,
        limit: int | None = None,
        after: Mapping[str, object] | None = None,
    ) -> pb.LookupResponse:
        req = messages.lookup_request(view, keys, min_epoch, self.columnar, limit, after)
        resp: pb.LookupResponse = self._call(self._stub.Lookup, req)
        if not messages.is_answer_of(resp, req):
            self.columnar = False  # an older server: rows from now on
            resp = self._call(
                self._stub.Lookup, messages.lookup_request(view, keys, min_epoch, False, limit, after)
            )
        return resp

    def subscribe(self, view: str, keys: Sequence[Mapping[str, object]]) -> Subscription:
        """Subscribes to the rows of `view` for `keys` (dicts naming the same attributes, as
        for `lookup_many`): an iterator of `Change`s, the first the snapshot of the keys'
        rows (`change.snapshot` is True), then one per epoch that changed them, as long as
        the subscription is open. `for change in db.subscribe(...)` blocks for each;
        `close()` (or a `with` block) cancels it. The keys stay present on the server while
        it is open. Errors raise from the iteration: e.g. `ResourceExhausted` when this
        subscriber fell behind the server's buffer of changes."""
        call = self._stub.Subscribe(messages.subscribe_request(view, keys), metadata=self._metadata)
        return Subscription(call, self._attributes.get(view))

    def describe(self, view: str | None = None) -> dict[str, object]:
        """Returns {program, relations, nodes} of the installed program; `nodes` is the
        dataflow graph of `view` built so far (inputs first), empty without a view or
        before its first lookup: a dict per operator of DataflowNode's fields (id, operator,
        detail, inputs, stateful, key, partial, present_keys, rows, bytes, ..., unmeasured)."""
        resp = self._call(self._stub.Describe, pb.DescribeRequest(view=view or ""))
        self._attributes = messages.relation_attributes(resp.relations)
        return messages.describe_result(resp)

    def evict(
        self, view: str | None = None, keys: Sequence[Mapping[str, object]] | None = None
    ) -> dict[str, int]:
        """Drops the server's cached state of `keys` of `view` (None: every key of the view's
        readers; no view: every key of every partial state, the states above the readers
        too); the next lookups fetch it again, with the same answers. Full states and keys a
        subscription pins stay. Returns {keys_evicted, pinned_keys, estimated_bytes, epoch}:
        the keys evicted where asked, the asked keys left because they are pinned, what the
        partial states' estimate of their bytes fell by, and the applied epoch then."""
        return messages.evict_result(self._call(self._stub.Evict, messages.evict_request(view, keys)))

    def stats(self) -> dict[str, object]:
        """Returns the server's counters and readers (see `StatsResponse`)."""
        return messages.stats_result(self._call(self._stub.Stats, pb.StatsRequest()))

    def load(
        self,
        source: str,
        path: str | os.PathLike[str],
        format: str | None = None,
        options: Mapping[str, str] | None = None,
        progress: messages.ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> tuple[int, int]:
        """Bulk-imports a CSV, Parquet or JSON-lines file into `source` as one epoch; returns
        (rows, epoch).

        The server's Spark reads `path`: a local path is made absolute here, so it must name
        the same file on the server (the default server runs on this machine); a URI is
        passed as is. `format` is "csv", "parquet" or "jsonl" (default: from the extension);
        `options` are CSV options (header, delimiter, quote, escape). `progress` is called
        with each report {phase, tasks_done, tasks_total, fraction, rows}. A row that does
        not fit the source raises InvalidArgument naming `FILE:ROW` and the reason, and
        nothing is loaded. Unlike other calls, a load has no deadline unless `timeout` is
        given: a big file takes as long as it takes.
        """
        request = messages.load_request(source, path, format, options)
        call = self._stub.Load(request, timeout=timeout, metadata=self._metadata)
        try:
            for msg in call:
                if msg.HasField("done"):
                    return msg.done.rows, msg.done.epoch
                if progress is not None:
                    progress(messages.load_progress(msg.progress))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err
        finally:
            call.cancel()  # a no-op once done; else (an interrupt) it stops the server's jobs
        raise messages.unfinished_load()
