"""The gRPC ViewService: wire messages <-> the scheduler, errors -> status codes."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from pomoview.dataflow.introspect import NodeInfo
from pomoview.planner.compile import CompiledProgram
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.proto.pomoview.v1 import view_service_pb2_grpc as pb_grpc
from pomoview.server.api.answers import FORMS, ColumnEncoder, RowAnswer, answer_of, to_value
from pomoview.server.api.requests import KeyShapes, lookup_keys, row_keys, side, typed_row
from pomoview.server.errors import ServiceError
from pomoview.server.load.bulk_load import Progress
from pomoview.server.reads.evictions import evict
from pomoview.server.reads.lookups import view_relation
from pomoview.server.reads.pages import Page, check_page, cut_page
from pomoview.server.scheduler.scheduler import Scheduler
from pomoview.server.spark.executors import SparkStatus
from pomoview.server.typed_rows import ColumnRows, Rows, TypedKeys, coerce_typed
from pomoview.server.views.subscriptions import Subscription

log = logging.getLogger("pomoview.service")
T = TypeVar("T")
Answer = RowAnswer | ColumnEncoder

def relations_message(program: CompiledProgram) -> list[pb.Relation]:
    out = []
    for name, relation in program.relations.items():
        out.append(
            pb.Relation(
                name=name,
                attributes=[
                    pb.Attribute(name=a, type=relation.types.get(a, ""))
                    for a in relation.attributes
                ],
                kind=relation.kind,
                is_view=name in program.views,
                key=list(program.views.get(name, ())),
            )
        )
    return out


def node_message(node: NodeInfo) -> pb.DataflowNode:
    return pb.DataflowNode(
        id=node.id,
        operator=node.operator,
        detail=node.detail,
        inputs=node.inputs,
        stateful=node.stateful,
        key=node.key,
        partial=node.partial,
        present_keys=node.present_keys,
        rows=node.rows,
        bytes=node.bytes,
        dropped=node.dropped,
        upqueries=node.upqueries,
        evictions=node.evictions,
        views=node.views,
        unmeasured=node.unmeasured,
    )


def _as_they_are(rows: list[Any]) -> list[Any]:
    return rows


def _serialize_lookup(response: pb.LookupResponse | bytes) -> bytes:
    return response if isinstance(response, bytes) else response.SerializeToString()


@dataclass(frozen=True)
class Undecodable:
    """A request that does not parse as its message type (malformed protobuf, or a string
    field that is not UTF-8): the handler refuses it with INVALID_ARGUMENT. grpc would answer
    a deserializer's exception with INTERNAL."""

    message: str


def _decoder(message_type: type[Message]) -> Callable[[bytes], object]:
    name = message_type.DESCRIPTOR.full_name

    def decode(data: bytes) -> object:
        try:
            return message_type.FromString(data)
        except DecodeError as err:
            return Undecodable(
                f"the request is not a valid {name} ({err}); is every string field UTF-8?"
            )

    return decode


_WRITE_REQUEST = _decoder(pb.WriteRequest)


def _refusing_undecodable(method: Callable[..., Any], streaming: bool) -> Callable[..., Any]:
    if streaming:

        def stream(request: object, context: grpc.ServicerContext) -> Iterator[Any]:
            if isinstance(request, Undecodable):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            yield from method(request, context)

        return stream

    def unary(request: object, context: grpc.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        return method(request, context)

    return unary


def add_view_service(service: ViewService, server: grpc.Server) -> None:
    """Registers the service like the generated `add_ViewServiceServicer_to_server`, except
    that Lookup may answer with an already serialized response, and a request that does not
    parse gets INVALID_ARGUMENT."""
    descriptor = pb.DESCRIPTOR.services_by_name["ViewService"]
    handlers = {}
    for method in descriptor.methods:
        request = getattr(pb, method.input_type.name)
        response = getattr(pb, method.output_type.name)
        serialize = _serialize_lookup if method.name == "Lookup" else response.SerializeToString
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            _refusing_undecodable(getattr(service, method.name), method.server_streaming),
            request_deserializer=_decoder(request),
            response_serializer=serialize,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(descriptor.full_name, handlers),))
    server.add_registered_method_handlers(descriptor.full_name, handlers)


class Aborted(Exception):
    """A call answered in process (`LocalContext`) ended with a status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class LocalContext:
    """The context of a call made in process rather than over gRPC (the hit replica's writes):
    no deadline, no metadata; `abort` raises `Aborted`."""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)

    def time_remaining(self) -> float | None:
        return None


class ViewService(pb_grpc.ViewServiceServicer):
    def __init__(
        self,
        scheduler: Scheduler,
        spark_status: Callable[[], SparkStatus] | None = None,
        replica_hits: Callable[[], int] | None = None,
    ) -> None:
        self.scheduler = scheduler
        # What Stats says of Spark (the executor watch's status); None: nothing.
        self._spark_status = spark_status
        # The hits the hit replica reported (None: no replica).
        self._replica_hits = replica_hits
        self._key_shapes = KeyShapes()
        # (id(program), view, columnar) -> (program, its answers' encoder)
        self._answers: dict[tuple[int, str, bool], tuple[CompiledProgram, Answer]] = {}

    def _call(self, context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except ServiceError as err:
            context.abort(getattr(grpc.StatusCode, err.code), err.message)
        except RecursionError:
            # Upqueries and evictions walk the plan with an explicit stack (dataflow/upquery.py),
            # so this is a walk that still recurses per operator: a bug, but one a smaller
            # program avoids, so say so rather than INTERNAL.
            log.exception("recursion limit reached")
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "the program's dataflow is too deep for this server (lower --max-plan-depth, env "
                "POMOVIEW_MAX_PLAN_DEPTH, refuses such programs at install)",
            )
        except Exception as err:
            log.exception("internal error")
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}: {err}")
        raise AssertionError("unreachable: abort raises")

    def Install(
        self, request: pb.InstallRequest, context: grpc.ServicerContext
    ) -> pb.InstallResponse:
        def run() -> pb.InstallResponse:
            program = self.scheduler.install(request.program, request.filename or "<program>")
            return pb.InstallResponse(relations=relations_message(program))

        return self._call(context, run)

    def Write(self, request: pb.WriteRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        def run() -> pb.WriteResponse:
            changes = [
                (change.source, side(change, i, "inserts"), side(change, i, "deletes"))
                for i, change in enumerate(request.changes)
            ]
            rows = sum(len(inserts) + len(deletes) for _, inserts, deletes in changes)
            self.scheduler.limits.check("max_write_rows", "the number of rows in the write", rows)
            return pb.WriteResponse(epoch=self.scheduler.write(changes))

        return self._call(context, run)

    def write_bytes(self, data: bytes) -> tuple[bool, bytes | tuple[str, str]]:
        """A serialized WriteRequest answered in process (the hit replica passes its writes
        this way, a cheaper hop than a gRPC call): (True, the serialized WriteResponse) or
        (False, (status code name, message))."""
        request = _WRITE_REQUEST(data)
        if isinstance(request, Undecodable):
            return False, ("INVALID_ARGUMENT", request.message)
        try:
            return True, self.Write(request, LocalContext()).SerializeToString()  # type: ignore[arg-type]
        except Aborted as err:
            return False, (err.code.name, err.details)

    def Lookup(
        self, request: pb.LookupRequest, context: grpc.ServicerContext
    ) -> pb.LookupResponse | bytes:
        """Answers present keys without the dataflow lock, from each key's cached wire form
        (`Scheduler.hits`), as the serialized response itself; anything else (a miss, an
        epoch to wait for) takes the locked path with upqueries."""

        def run() -> pb.LookupResponse | bytes:
            scheduler = self.scheduler
            scheduler.metrics.lookups.inc()
            limits, view, program = scheduler.limits, request.view, scheduler.program
            relation = None if program is None or view not in program.views else program.relations.get(view)
            min_epoch = request.min_epoch if request.HasField("min_epoch") else None
            if request.HasField("limit") or request.HasField("after"):
                return self._page(request, self._wire_keys(request), min_epoch, context)
            keys: Rows | TypedKeys | None = None
            if relation is not None:
                keys = self._key_shapes.typed(request, relation)
            if keys is None:
                keys = self._wire_keys(request)
            else:
                limits.check("max_lookup_keys", "the number of keys in the lookup", len(keys))
            columnar = request.columnar
            if program is not None and relation is not None and len(keys):
                answer = self.answer(program, view, columnar)
                hit = scheduler.hits(view, keys, min_epoch, answer.encode, form=answer.form)
                if hit is not None:
                    return answer.response(*hit)
            # The answering round encodes each key's rows from the reader and caches them
            # there, so the hits after this miss encode nothing.
            used: list[Answer] = []

            def encoder(program: CompiledProgram, view: str) -> Callable[[list[Any]], Any]:
                used.append(self.answer(program, view, columnar))
                return used[-1].encode

            encoded, epoch = self.scheduler.lookup_encoded(
                view, keys, min_epoch, context.time_remaining(), encoder=encoder, form=FORMS[columnar]
            )
            return used[-1].response(encoded, epoch)

        def sized() -> pb.LookupResponse | bytes:
            answer = run()
            size = len(answer) if isinstance(answer, bytes) else answer.ByteSize()
            self.scheduler.limits.check_answer(request.view, size)
            return answer

        return self._call(context, sized)

    def _wire_keys(self, request: pb.LookupRequest) -> Rows:
        """The lookup's keys as sent (rows or columns), within the limit on their count."""
        limits = self.scheduler.limits
        limits.check("max_lookup_keys", "the number of keys in the lookup", len(request.keys))
        keys = lookup_keys(request)
        if isinstance(keys, ColumnRows):
            limits.check("max_lookup_keys", "the number of keys in the lookup", len(keys))
        return keys

    def _page(
        self, request: pb.LookupRequest, keys: Rows, min_epoch: int | None, context: grpc.ServicerContext
    ) -> bytes:
        """A page of each key's rows of an ordered view (server/reads/pages.py): the page is
        cut from the key's rows at the answer's epoch, read as a hit when every key is
        present, else on the locked path."""
        view, program = request.view, self.scheduler.view_state.require_program()
        relation = view_relation(program, view)
        order, attributes = program.checked.view_orders.get(view), relation.attributes
        after = typed_row(request.after, "after") if request.HasField("after") else None
        page = Page(request.limit if request.HasField("limit") else None, after)
        check_page(view, order, attributes, page)
        assert order is not None
        if after is not None:
            values = {a: coerce_typed(v, relation.types[a], f"after.{a}") for a, v in after.items()}
            page = Page(page.limit, values)
        # Present keys are read without the lock, as hits are: each key's rows in order, the
        # list itself cached per version of the key (the page is a slice of it).
        hit = self.scheduler.hits(view, keys, min_epoch, _as_they_are, form="page")
        if hit is not None:
            groups, epoch = hit
        else:
            groups, epoch = self.scheduler.lookup_rows(view, keys, min_epoch, context.time_remaining())
        answer = self.answer(program, view, request.columnar)
        pages = [cut_page(rows, order, attributes, page, view) for rows in groups]
        encoded = [answer.encode(rows) for rows in pages]
        return answer.response(encoded, epoch)

    def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.SubscribeUpdate]:
        """The keys' rows (the snapshot), then their changes per epoch, until the client
        cancels or the subscription ends with an error (subscriptions.py)."""

        def start() -> tuple[list[dict[str, object]], int, Subscription]:
            keys = row_keys(request.keys)
            return self.scheduler.subscribe(request.view, keys, timeout=context.time_remaining())

        rows, epoch, sub = self._call(context, start)
        typed = sub.attributes
        # Runs however the call ends (a cancel, the client gone, the stream's end): the
        # keys are released at once, not when this thread next wakes.
        if not context.add_callback(lambda: self.scheduler.unsubscribe(sub)):
            self.scheduler.unsubscribe(sub)  # the call ended already (cancelled during the fill)
            return

        def message(tuples: list[tuple[object, ...]]) -> list[pb.Row]:
            return [
                pb.Row(fields={a: to_value(v, t) for (a, t), v in zip(typed, row, strict=True)})
                for row in tuples
            ]

        def sized(update: pb.SubscribeUpdate) -> pb.SubscribeUpdate:
            def checked() -> pb.SubscribeUpdate:
                limits = self.scheduler.limits
                limits.check_answer(request.view, update.ByteSize(), subscription=True)
                return update

            return self._call(context, checked)

        try:
            yield sized(
                pb.SubscribeUpdate(
                    epoch=epoch,
                    snapshot=True,
                    inserts=message([tuple(r[a] for a, _ in typed) for r in rows]),
                )
            )
            while True:
                try:
                    item = sub.next(timeout=5.0)
                except ServiceError as err:

                    def fail(err: ServiceError = err) -> None:
                        raise err

                    self._call(context, fail)
                    return
                if item is None:
                    if sub.closed or not context.is_active():
                        return
                    continue
                at, changes = item
                yield sized(
                    pb.SubscribeUpdate(
                        epoch=at,
                        inserts=message([row for row, w in changes if w > 0]),
                        deletes=message([row for row, w in changes if w < 0]),
                    )
                )
        finally:
            self.scheduler.unsubscribe(sub)

    def answer(self, program: CompiledProgram, view: str, columnar: bool) -> Answer:
        """The encoder of `view`'s answers in rows or in columns (one per program and form);
        in rows for a view that does not fit columns (`ColumnEncoder.fits`)."""
        cached = self._answers.get((id(program), view, columnar))
        if cached is not None and cached[0] is program:
            return cached[1]
        relation = program.relations[view]
        typed = [(a, relation.types[a]) for a in relation.attributes]
        answer = answer_of(typed, columnar)
        self._answers[(id(program), view, columnar)] = (program, answer)
        return answer

    def Describe(
        self, request: pb.DescribeRequest, context: grpc.ServicerContext
    ) -> pb.DescribeResponse:
        program = self.scheduler.program
        if program is None:
            return pb.DescribeResponse()
        nodes: list[NodeInfo] = []
        if request.view:
            nodes = self._call(context, lambda: self.scheduler.dataflow_nodes(request.view))
        return pb.DescribeResponse(
            program=program.text,
            relations=relations_message(program),
            nodes=[node_message(n) for n in nodes],
        )

    def Stats(self, request: pb.StatsRequest, context: grpc.ServicerContext) -> pb.StatsResponse:
        stats = self.scheduler.stats()
        spark = self._spark_status() if self._spark_status is not None else None
        return pb.StatsResponse(
            applied_epoch=stats.applied_epoch,
            durable_epoch=stats.durable_epoch,
            flushed_epoch=stats.flushed_epoch,
            upqueries=stats.upqueries,
            spark_jobs=stats.spark_jobs,
            dropped_deltas=stats.dropped_deltas,
            readers=[
                pb.ReaderStats(
                    view=r.view, key=list(r.key), partial=r.partial, present_keys=r.present_keys
                )
                for r in stats.readers
            ],
            states=[node_message(n) for n in stats.states],
            memory_budget=stats.memory_budget,
            rss_bytes=stats.rss_bytes,
            baseline_rss_bytes=stats.baseline_rss_bytes,
            partial_state_bytes=stats.partial_state_bytes,
            eviction_rounds=stats.eviction_rounds,
            apply_lag_seconds=stats.apply_lag_seconds,
            apply_lag_epochs=stats.apply_lag_epochs,
            spark_executors=spark.executors if spark is not None else -1,
            spark_status=spark.summary if spark is not None else "",
            replica_hits=self._replica_hits() if self._replica_hits is not None else 0,
            states_epoch=stats.states_epoch,
        )

    def Evict(self, request: pb.EvictRequest, context: grpc.ServicerContext) -> pb.EvictResponse:
        """Evicts keys of a view, every key of a view, or every key of every partial state
        (server/reads/evictions.py)."""

        def run() -> pb.EvictResponse:
            self.scheduler.limits.check("max_lookup_keys", "the number of keys to evict", len(request.keys))
            done = evict(self.scheduler.view_state, request.view or None, row_keys(request.keys))
            return pb.EvictResponse(
                keys_evicted=done.keys,
                pinned_keys=done.pinned,
                estimated_bytes=done.estimated_bytes,
                epoch=done.epoch,
            )

        return self._call(context, run)

    def Load(
        self, request: pb.LoadRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.LoadProgress]:
        """Streams the load's progress, then its row count and epoch. The load runs on its own
        thread; if the call ends early (the client cancelled or went away) its Spark jobs
        are cancelled, and a load that had not committed yet changes nothing."""
        # Progress reports, then (rows, epoch) or the error that ended the load.
        events: queue.Queue[Progress | tuple[int, int] | BaseException] = queue.Queue()
        cancelled = threading.Event()
        context.add_callback(cancelled.set)

        def run() -> None:
            try:
                events.put(
                    self.scheduler.load(
                        request.source,
                        request.path,
                        request.format,
                        dict(request.options),
                        progress=events.put,
                        cancelled=cancelled,
                    )
                )
            except BaseException as err:  # handed to the RPC thread, which reports it
                events.put(err)

        threading.Thread(target=run, name="load", daemon=True).start()
        while True:
            item = events.get()
            if isinstance(item, Progress):
                yield pb.LoadProgress(
                    progress=pb.LoadProgress.Progress(
                        phase=item.phase,
                        tasks_done=item.tasks_done,
                        tasks_total=item.tasks_total,
                        fraction=item.fraction,
                        rows=item.rows,
                    )
                )
            elif isinstance(item, tuple):
                rows, epoch = item
                yield pb.LoadProgress(done=pb.LoadProgress.Done(rows=rows, epoch=epoch))
                return
            else:

                def fail(err: BaseException = item) -> None:
                    raise err

                self._call(context, fail)
                return
