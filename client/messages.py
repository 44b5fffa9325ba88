"""Request builders and response readers shared by `Client` and `AsyncClient`.

Keeping them here means the sync and asyncio clients differ only in how they call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate, chain
from operator import itemgetter
from typing import NoReturn
from urllib.parse import urlsplit

import grpc

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

from .errors import InvalidArgument, PomoviewError
from .results import Attributes, KeyTuple, Rows, RowsByKey
from .values import answer_rows, dict_to_row, row_to_dict, rows_to_columns

Changes = Mapping[str, tuple[Iterable[Mapping[str, object]], Iterable[Mapping[str, object]]]]
# Called with each progress report of a load: {phase, tasks_done, tasks_total, fraction, rows}.
ProgressCallback = Callable[[dict[str, object]], None]


def relation_to_dict(rel: pb.Relation) -> dict[str, object]:
    """Returns a `Relation` as {name, kind, is_view, key, attributes: [{name, type}]}."""
    return {
        "name": rel.name,
        "kind": rel.kind,
        "is_view": rel.is_view,
        "key": list(rel.key),
        "attributes": [{"name": a.name, "type": a.type} for a in rel.attributes],
    }


def install_request(text: str, filename: str) -> pb.InstallRequest:
    """Returns the request installing program `text`."""
    return pb.InstallRequest(program=text, filename=filename)


def install_result(resp: pb.InstallResponse) -> list[dict[str, object]]:
    """Returns the installed relations as dicts."""
    return [relation_to_dict(r) for r in resp.relations]


def write_request(changes: Changes, columnar: bool | None = None) -> pb.WriteRequest:
    """Returns one atomic batch: per source, its inserted and deleted rows.

    Each side goes as columns (`Columns`) when its rows fit them (`rows_to_columns`), else as
    rows; the server checks both forms alike. `columnar=False` sends rows only;
    `columnar=True` sends columns only and raises ValueError for rows that do not fit.
    """
    req = pb.WriteRequest()
    for source, (inserts, deletes) in changes.items():
        sc = req.changes.add(source=source)
        for rows, side, columns_field in (
            (inserts, sc.inserts, "insert_columns"),
            (deletes, sc.deletes, "delete_columns"),
        ):
            rows = rows if isinstance(rows, list | tuple) else list(rows)
            if not rows:
                continue
            columns = rows_to_columns(rows) if columnar is not False else None
            if columns is not None:
                getattr(sc, columns_field).CopyFrom(columns)
            elif columnar:
                raise ValueError(f"the {columns_field} of {source!r} do not fit the columnar form")
            else:
                side.extend(dict_to_row(r) for r in rows)
    return req


def lookup_request(
    view: str,
    keys: Sequence[Mapping[str, object]],
    min_epoch: int | None,
    columnar: bool = False,
    limit: int | None = None,
    after: Mapping[str, object] | None = None,
) -> pb.LookupRequest:
    """Returns a lookup of `keys` in `view`; `min_epoch` is sent only when given, and so are
    `limit` and `after` (a page of an ordered view: at most `limit` rows per key after the
    row `after`).

    `columnar`: ask for the answer in columns, and send the keys as columns (`key_columns`)
    when they fit them (`rows_to_columns`), else as rows. Otherwise everything is rows, as
    clients did before columnar answers."""
    req = pb.LookupRequest(view=view, columnar=columnar)
    if not columnar or rows_to_columns(keys, req.key_columns) is None:
        req.ClearField("key_columns")
        req.keys.extend(dict_to_row(k) for k in keys)
    if min_epoch is not None:
        if min_epoch < 0:
            raise ValueError(f"min_epoch must be >= 0, got {min_epoch}")
        req.min_epoch = min_epoch
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        req.limit = limit
    if after is not None:
        req.after.CopyFrom(dict_to_row(after))
    return req


def subscribe_request(view: str, keys: Sequence[Mapping[str, object]]) -> pb.SubscribeRequest:
    """Returns a subscription to `keys` of `view`; refuses, before sending, no keys or keys
    naming different attributes (as the server would)."""
    if not keys:
        raise InvalidArgument("a subscription needs at least one key")
    key_tuples(keys)
    return pb.SubscribeRequest(view=view, keys=[dict_to_row(k) for k in keys])


def is_answer_of(resp: pb.LookupResponse, req: pb.LookupRequest) -> bool:
    """False when `req` asked for columns and `resp` has neither columns nor rows: the server
    predates columnar answers and did not see the keys sent as columns; ask it again in
    rows. (A server that has them answers a view it cannot put in columns in rows, one
    `results` entry per key; the readers take either form.)"""
    return not req.columnar or resp.HasField("columns") or len(resp.results) > 0


def lookup_rows(
    resp: pb.LookupResponse, n_keys: int, attributes: Attributes | None
) -> list[Rows]:
    """Returns the rows per key, in the keys' order, checking the server answered every key."""
    if resp.HasField("columns"):
        return _column_rows(resp, n_keys, attributes)
    _check_count(resp, n_keys)
    return [_rows(kr, attributes) for kr in resp.results]


def lookup_result(
    resp: pb.LookupResponse, keys: Sequence[KeyTuple], attributes: Attributes | None
) -> RowsByKey:
    """Returns lookup_many's answer: the rows of each distinct key of `keys` (see
    `key_tuples`), in the order keys were first asked."""
    result = RowsByKey()
    result.attributes = attributes
    if resp.HasField("columns"):
        # In C. A key asked twice keeps its first place; its rows are the same (one snapshot).
        result.update(zip(keys, _column_rows(resp, len(keys), attributes), strict=True))
        return result
    _check_count(resp, len(keys))
    for key, kr in zip(keys, resp.results, strict=True):
        # One answer is one snapshot, so a repeated key's rows are the same: not decoded twice.
        if key not in result:
            result[key] = _rows(kr, attributes)
    return result


def key_tuples(keys: Sequence[Mapping[str, object]]) -> list[KeyTuple]:
    """Each key's values in the order of the first key's attributes: lookup_many's dict keys.
    Raises InvalidArgument, in the server's words, for a key naming other attributes."""
    attrs = tuple(keys[0])
    # Whole-list passes rather than a branchy loop per key: a many-key read of hot keys
    # spends its client time here and building the request.
    try:
        # A whole view's key names no attribute, and itemgetter() takes at least one.
        values = list(map(itemgetter(*attrs), keys)) if attrs else [()] * len(keys)
    except KeyError:
        values = []
    if len(values) != len(keys) or set(map(len, keys)) != {len(attrs)}:
        _refuse_other_attributes(keys, attrs)
    # itemgetter of one name returns the bare value.
    tuples: list[KeyTuple] = list(zip(values)) if len(attrs) == 1 else values
    if bytearray in set(map(type, values if len(attrs) == 1 else chain.from_iterable(tuples))):
        # A valid value, but no dict key; as bytes it equals the answer's value.
        tuples = [tuple(bytes(v) if type(v) is bytearray else v for v in t) for t in tuples]
    return tuples


def _refuse_other_attributes(keys: Sequence[Mapping[str, object]], attrs: tuple[str, ...]) -> NoReturn:
    for i, key in enumerate(keys):
        if key.keys() != set(attrs):
            raise InvalidArgument(f"keys[{i}] names {sorted(key)}, keys[0] names {sorted(attrs)}")
    raise InvalidArgument("the keys name different attributes")  # a Mapping whose keys() lies


def relation_attributes(relations: Iterable[pb.Relation]) -> dict[str, Attributes]:
    """Each relation's (name, type) attributes in declared order, by relation name."""
    return {r.name: tuple((a.name, a.type) for a in r.attributes) for r in relations}


def _rows(kr: pb.KeyRows, attributes: Attributes | None) -> Rows:
    rows = Rows([row_to_dict(r) for r in kr.rows])
    if attributes is not None:
        rows.attributes = attributes
    return rows


def _column_rows(resp: pb.LookupResponse, n_keys: int, attributes: Attributes | None) -> list[Rows]:
    """The rows per key of a columnar answer: its rows (`answer_rows`) cut by its counts."""
    counts = resp.row_counts
    if len(counts) != n_keys:
        raise PomoviewError(
            f"server returned {len(counts)} results for {n_keys} keys", grpc.StatusCode.INTERNAL
        )
    if n_keys == 1:  # Client.lookup's, the most common
        out = [Rows(_answer_rows(resp.columns, counts[0]))]
    else:
        counts = list(counts)
        rows = _answer_rows(resp.columns, sum(counts))
        if counts.count(1) == n_keys:  # a row per key, as most views have
            out = list(map(Rows, zip(rows)))
        else:
            ends = list(accumulate(counts))
            out = list(map(Rows, map(rows.__getitem__, map(slice, [0, *ends], ends))))
    if attributes is not None:
        for key_rows in out:
            key_rows.attributes = attributes
    return out


def _answer_rows(columns: pb.Columns, count: int) -> list[dict[str, object]]:
    try:
        return answer_rows(columns, count)
    except ValueError as err:
        message = f"server returned a bad columnar answer: {err}"
        raise PomoviewError(message, grpc.StatusCode.INTERNAL) from None


def _check_count(resp: pb.LookupResponse, n_keys: int) -> None:
    if len(resp.results) != n_keys:
        # A mismatch would silently pair rows with the wrong keys; refuse it.
        raise PomoviewError(
            f"server returned {len(resp.results)} results for {n_keys} keys",
            grpc.StatusCode.INTERNAL,
        )


def describe_result(resp: pb.DescribeResponse) -> dict[str, object]:
    """Returns {program, relations, nodes}."""
    return {
        "program": resp.program,
        "relations": [relation_to_dict(r) for r in resp.relations],
        "nodes": [node_to_dict(n) for n in resp.nodes],
    }


def evict_request(view: str | None, keys: Sequence[Mapping[str, object]] | None) -> pb.EvictRequest:
    """Keys of `view` to evict (None: every key of it); no view: every key of every partial
    state (keys without a view are refused by the server)."""
    return pb.EvictRequest(view=view or "", keys=[dict_to_row(k) for k in keys or ()])


def evict_result(resp: pb.EvictResponse) -> dict[str, int]:
    """Returns {keys_evicted, pinned_keys, estimated_bytes, epoch}."""
    return {
        "keys_evicted": resp.keys_evicted,
        "pinned_keys": resp.pinned_keys,
        "estimated_bytes": resp.estimated_bytes,
        "epoch": resp.epoch,
    }


def stats_result(resp: pb.StatsResponse) -> dict[str, object]:
    """Returns the `StatsResponse` fields as a dict; `readers` and `states` (one per dataflow
    node, inputs first) as lists of dicts."""
    # Spelled out rather than json_format.MessageToDict, which renders uint64 as strings.
    return {
        "applied_epoch": resp.applied_epoch,
        "durable_epoch": resp.durable_epoch,
        "flushed_epoch": resp.flushed_epoch,
        "upqueries": resp.upqueries,
        "spark_jobs": resp.spark_jobs,
        "dropped_deltas": resp.dropped_deltas,
        "apply_lag_seconds": resp.apply_lag_seconds,
        "apply_lag_epochs": resp.apply_lag_epochs,
        # Lookups the hit replica (serve --hit-replica) answered itself; 0 without one.
        "replica_hits": resp.replica_hits,
        # The applied epoch `readers` and `states` describe (below applied_epoch while a step runs).
        "states_epoch": resp.states_epoch,
        # The executors the server's Spark application has (-1: its session is starting).
        "spark": {"executors": resp.spark_executors, "status": resp.spark_status},
        "readers": [
            {
                "view": r.view,
                "key": list(r.key),
                "partial": r.partial,
                "present_keys": r.present_keys,
            }
            for r in resp.readers
        ],
        "states": [node_to_dict(n) for n in resp.states],
        "memory": {
            "budget": resp.memory_budget,
            "rss_bytes": resp.rss_bytes,
            "baseline_rss_bytes": resp.baseline_rss_bytes,
            "partial_state_bytes": resp.partial_state_bytes,
            "eviction_rounds": resp.eviction_rounds,
        },
    }


def node_to_dict(node: pb.DataflowNode) -> dict[str, object]:
    """One dataflow node (operator and state) as a dict of its fields."""
    return {
        "id": node.id,
        "operator": node.operator,
        "detail": node.detail,
        "inputs": list(node.inputs),
        "stateful": node.stateful,
        "key": list(node.key),
        "partial": node.partial,
        "present_keys": node.present_keys,
        "rows": node.rows,
        "bytes": node.bytes,
        "dropped": node.dropped,
        "upqueries": node.upqueries,
        "evictions": node.evictions,
        "views": list(node.views),
        "unmeasured": node.unmeasured,
    }


def load_path(path: str | os.PathLike[str]) -> str:
    """A file to load as the server should see it: a URI as is, a local path made absolute
    (against this process's working folder; the server resolves nothing itself)."""
    text = os.fspath(path)
    parts = urlsplit(text)
    if parts.scheme and len(parts.scheme) > 1:  # a URI (a one-letter scheme is a drive)
        return text
    return os.path.abspath(text)


def load_request(
    source: str,
    path: str | os.PathLike[str],
    format: str | None,
    options: Mapping[str, str] | None,
) -> pb.LoadRequest:
    """Returns the request loading `path` into `source`."""
    return pb.LoadRequest(
        source=source,
        path=load_path(path),
        format=format or "",
        options={str(k): str(v) for k, v in (options or {}).items()},
    )


def load_progress(msg: pb.LoadProgress.Progress) -> dict[str, object]:
    """Returns a progress report as {phase, tasks_done, tasks_total, fraction, rows}."""
    return {
        "phase": msg.phase,
        "tasks_done": msg.tasks_done,
        "tasks_total": msg.tasks_total,
        "fraction": msg.fraction,
        "rows": msg.rows,
    }


def unfinished_load() -> PomoviewError:
    """The error for a load stream that ended without its result."""
    return PomoviewError("the load ended without a result", grpc.StatusCode.INTERNAL)
