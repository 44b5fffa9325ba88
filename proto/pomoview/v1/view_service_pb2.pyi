from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Value(_message.Message):
    __slots__ = ("int_value", "float_value", "string_value", "bool_value", "bytes_value", "cid_value")
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    CID_VALUE_FIELD_NUMBER: _ClassVar[int]
    int_value: int
    float_value: float
    string_value: str
    bool_value: bool
    bytes_value: bytes
    cid_value: str
    def __init__(self, int_value: _Optional[int] = ..., float_value: _Optional[float] = ..., string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., bytes_value: _Optional[bytes] = ..., cid_value: _Optional[str] = ...) -> None: ...

class Row(_message.Message):
    __slots__ = ("fields",)
    class FieldsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.MessageMap[str, Value]
    def __init__(self, fields: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class Attribute(_message.Message):
    __slots__ = ("name", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class Relation(_message.Message):
    __slots__ = ("name", "attributes", "kind", "is_view", "key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    IS_VIEW_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.RepeatedCompositeFieldContainer[Attribute]
    kind: str
    is_view: bool
    key: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Iterable[_Union[Attribute, _Mapping]]] = ..., kind: _Optional[str] = ..., is_view: _Optional[bool] = ..., key: _Optional[_Iterable[str]] = ...) -> None: ...

class InstallRequest(_message.Message):
    __slots__ = ("program", "filename")
    PROGRAM_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    program: str
    filename: str
    def __init__(self, program: _Optional[str] = ..., filename: _Optional[str] = ...) -> None: ...

class InstallResponse(_message.Message):
    __slots__ = ("relations",)
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    relations: _containers.RepeatedCompositeFieldContainer[Relation]
    def __init__(self, relations: _Optional[_Iterable[_Union[Relation, _Mapping]]] = ...) -> None: ...

class Column(_message.Message):
    __slots__ = ("name", "int_values", "float_values", "string_values", "bool_values", "bytes_values", "cid_values")
    class Ints(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...
    class Floats(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[float]
        def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...
    class Strings(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...
    class Bools(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[bool]
        def __init__(self, values: _Optional[_Iterable[bool]] = ...) -> None: ...
    class Bytes(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[bytes]
        def __init__(self, values: _Optional[_Iterable[bytes]] = ...) -> None: ...
    class Cids(_message.Message):
        __slots__ = ("values",)
        VALUES_FIELD_NUMBER: _ClassVar[int]
        values: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    INT_VALUES_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUES_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUES_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUES_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUES_FIELD_NUMBER: _ClassVar[int]
    CID_VALUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    int_values: Column.Ints
    float_values: Column.Floats
    string_values: Column.Strings
    bool_values: Column.Bools
    bytes_values: Column.Bytes
    cid_values: Column.Cids
    def __init__(self, name: _Optional[str] = ..., int_values: _Optional[_Union[Column.Ints, _Mapping]] = ..., float_values: _Optional[_Union[Column.Floats, _Mapping]] = ..., string_values: _Optional[_Union[Column.Strings, _Mapping]] = ..., bool_values: _Optional[_Union[Column.Bools, _Mapping]] = ..., bytes_values: _Optional[_Union[Column.Bytes, _Mapping]] = ..., cid_values: _Optional[_Union[Column.Cids, _Mapping]] = ...) -> None: ...

class Columns(_message.Message):
    __slots__ = ("columns",)
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    columns: _containers.RepeatedCompositeFieldContainer[Column]
    def __init__(self, columns: _Optional[_Iterable[_Union[Column, _Mapping]]] = ...) -> None: ...

class SourceChanges(_message.Message):
    __slots__ = ("source", "inserts", "deletes", "insert_columns", "delete_columns")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    INSERTS_FIELD_NUMBER: _ClassVar[int]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    INSERT_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    DELETE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    source: str
    inserts: _containers.RepeatedCompositeFieldContainer[Row]
    deletes: _containers.RepeatedCompositeFieldContainer[Row]
    insert_columns: Columns
    delete_columns: Columns
    def __init__(self, source: _Optional[str] = ..., inserts: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., deletes: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., insert_columns: _Optional[_Union[Columns, _Mapping]] = ..., delete_columns: _Optional[_Union[Columns, _Mapping]] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("changes",)
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[SourceChanges]
    def __init__(self, changes: _Optional[_Iterable[_Union[SourceChanges, _Mapping]]] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("epoch",)
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ("view", "keys", "min_epoch", "key_columns", "columnar", "limit", "after")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    MIN_EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEY_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    COLUMNAR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    view: str
    keys: _containers.RepeatedCompositeFieldContainer[Row]
    min_epoch: int
    key_columns: Columns
    columnar: bool
    limit: int
    after: Row
    def __init__(self, view: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., min_epoch: _Optional[int] = ..., key_columns: _Optional[_Union[Columns, _Mapping]] = ..., columnar: _Optional[bool] = ..., limit: _Optional[int] = ..., after: _Optional[_Union[Row, _Mapping]] = ...) -> None: ...

class KeyRows(_message.Message):
    __slots__ = ("rows",)
    ROWS_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[Row]
    def __init__(self, rows: _Optional[_Iterable[_Union[Row, _Mapping]]] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("results", "epoch", "columns", "row_counts")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[KeyRows]
    epoch: int
    columns: Columns
    row_counts: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, results: _Optional[_Iterable[_Union[KeyRows, _Mapping]]] = ..., epoch: _Optional[int] = ..., columns: _Optional[_Union[Columns, _Mapping]] = ..., row_counts: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ("view",)
    VIEW_FIELD_NUMBER: _ClassVar[int]
    view: str
    def __init__(self, view: _Optional[str] = ...) -> None: ...

class DataflowNode(_message.Message):
    __slots__ = ("id", "operator", "detail", "inputs", "stateful", "key", "partial", "present_keys", "rows", "bytes", "dropped", "upqueries", "evictions", "views", "unmeasured")
    ID_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    STATEFUL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    PRESENT_KEYS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    UPQUERIES_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    VIEWS_FIELD_NUMBER: _ClassVar[int]
    UNMEASURED_FIELD_NUMBER: _ClassVar[int]
    id: str
    operator: str
    detail: str
    inputs: _containers.RepeatedScalarFieldContainer[str]
    stateful: bool
    key: _containers.RepeatedScalarFieldContainer[str]
    partial: bool
    present_keys: int
    rows: int
    bytes: int
    dropped: int
    upqueries: int
    evictions: int
    views: _containers.RepeatedScalarFieldContainer[str]
    unmeasured: bool
    def __init__(self, id: _Optional[str] = ..., operator: _Optional[str] = ..., detail: _Optional[str] = ..., inputs: _Optional[_Iterable[str]] = ..., stateful: _Optional[bool] = ..., key: _Optional[_Iterable[str]] = ..., partial: _Optional[bool] = ..., present_keys: _Optional[int] = ..., rows: _Optional[int] = ..., bytes: _Optional[int] = ..., dropped: _Optional[int] = ..., upqueries: _Optional[int] = ..., evictions: _Optional[int] = ..., views: _Optional[_Iterable[str]] = ..., unmeasured: _Optional[bool] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("program", "relations", "nodes")
    PROGRAM_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    program: str
    relations: _containers.RepeatedCompositeFieldContainer[Relation]
    nodes: _containers.RepeatedCompositeFieldContainer[DataflowNode]
    def __init__(self, program: _Optional[str] = ..., relations: _Optional[_Iterable[_Union[Relation, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[DataflowNode, _Mapping]]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EvictRequest(_message.Message):
    __slots__ = ("view", "keys")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    view: str
    keys: _containers.RepeatedCompositeFieldContainer[Row]
    def __init__(self, view: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[Row, _Mapping]]] = ...) -> None: ...

class EvictResponse(_message.Message):
    __slots__ = ("keys_evicted", "pinned_keys", "estimated_bytes", "epoch")
    KEYS_EVICTED_FIELD_NUMBER: _ClassVar[int]
    PINNED_KEYS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_BYTES_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    keys_evicted: int
    pinned_keys: int
    estimated_bytes: int
    epoch: int
    def __init__(self, keys_evicted: _Optional[int] = ..., pinned_keys: _Optional[int] = ..., estimated_bytes: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ReaderStats(_message.Message):
    __slots__ = ("view", "key", "partial", "present_keys")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    PRESENT_KEYS_FIELD_NUMBER: _ClassVar[int]
    view: str
    key: _containers.RepeatedScalarFieldContainer[str]
    partial: bool
    present_keys: int
    def __init__(self, view: _Optional[str] = ..., key: _Optional[_Iterable[str]] = ..., partial: _Optional[bool] = ..., present_keys: _Optional[int] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("applied_epoch", "durable_epoch", "flushed_epoch", "upqueries", "spark_jobs", "dropped_deltas", "readers", "states", "memory_budget", "rss_bytes", "baseline_rss_bytes", "partial_state_bytes", "eviction_rounds", "apply_lag_seconds", "apply_lag_epochs", "spark_executors", "spark_status", "replica_hits", "states_epoch")
    APPLIED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DURABLE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    UPQUERIES_FIELD_NUMBER: _ClassVar[int]
    SPARK_JOBS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_DELTAS_FIELD_NUMBER: _ClassVar[int]
    READERS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    BASELINE_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_STATE_BYTES_FIELD_NUMBER: _ClassVar[int]
    EVICTION_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    APPLY_LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    APPLY_LAG_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    SPARK_EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    SPARK_STATUS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_HITS_FIELD_NUMBER: _ClassVar[int]
    STATES_EPOCH_FIELD_NUMBER: _ClassVar[int]
    applied_epoch: int
    durable_epoch: int
    flushed_epoch: int
    upqueries: int
    spark_jobs: int
    dropped_deltas: int
    readers: _containers.RepeatedCompositeFieldContainer[ReaderStats]
    states: _containers.RepeatedCompositeFieldContainer[DataflowNode]
    memory_budget: int
    rss_bytes: int
    baseline_rss_bytes: int
    partial_state_bytes: int
    eviction_rounds: int
    apply_lag_seconds: float
    apply_lag_epochs: int
    spark_executors: int
    spark_status: str
    replica_hits: int
    states_epoch: int
    def __init__(self, applied_epoch: _Optional[int] = ..., durable_epoch: _Optional[int] = ..., flushed_epoch: _Optional[int] = ..., upqueries: _Optional[int] = ..., spark_jobs: _Optional[int] = ..., dropped_deltas: _Optional[int] = ..., readers: _Optional[_Iterable[_Union[ReaderStats, _Mapping]]] = ..., states: _Optional[_Iterable[_Union[DataflowNode, _Mapping]]] = ..., memory_budget: _Optional[int] = ..., rss_bytes: _Optional[int] = ..., baseline_rss_bytes: _Optional[int] = ..., partial_state_bytes: _Optional[int] = ..., eviction_rounds: _Optional[int] = ..., apply_lag_seconds: _Optional[float] = ..., apply_lag_epochs: _Optional[int] = ..., spark_executors: _Optional[int] = ..., spark_status: _Optional[str] = ..., replica_hits: _Optional[int] = ..., states_epoch: _Optional[int] = ...) -> None: ...

class LoadRequest(_message.Message):
    __slots__ = ("source", "path", "format", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    source: str
    path: str
    format: str
    options: _containers.ScalarMap[str, str]
    def __init__(self, source: _Optional[str] = ..., path: _Optional[str] = ..., format: _Optional[str] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class LoadProgress(_message.Message):
    __slots__ = ("progress", "done")
    class Progress(_message.Message):
        __slots__ = ("phase", "tasks_done", "tasks_total", "fraction", "rows")
        PHASE_FIELD_NUMBER: _ClassVar[int]
        TASKS_DONE_FIELD_NUMBER: _ClassVar[int]
        TASKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
        FRACTION_FIELD_NUMBER: _ClassVar[int]
        ROWS_FIELD_NUMBER: _ClassVar[int]
        phase: str
        tasks_done: int
        tasks_total: int
        fraction: float
        rows: int
        def __init__(self, phase: _Optional[str] = ..., tasks_done: _Optional[int] = ..., tasks_total: _Optional[int] = ..., fraction: _Optional[float] = ..., rows: _Optional[int] = ...) -> None: ...
    class Done(_message.Message):
        __slots__ = ("rows", "epoch")
        ROWS_FIELD_NUMBER: _ClassVar[int]
        EPOCH_FIELD_NUMBER: _ClassVar[int]
        rows: int
        epoch: int
        def __init__(self, rows: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    progress: LoadProgress.Progress
    done: LoadProgress.Done
    def __init__(self, progress: _Optional[_Union[LoadProgress.Progress, _Mapping]] = ..., done: _Optional[_Union[LoadProgress.Done, _Mapping]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("view", "keys")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    view: str
    keys: _containers.RepeatedCompositeFieldContainer[Row]
    def __init__(self, view: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[Row, _Mapping]]] = ...) -> None: ...

class SubscribeUpdate(_message.Message):
    __slots__ = ("epoch", "snapshot", "inserts", "deletes")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    INSERTS_FIELD_NUMBER: _ClassVar[int]
    DELETES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    snapshot: bool
    inserts: _containers.RepeatedCompositeFieldContainer[Row]
    deletes: _containers.RepeatedCompositeFieldContainer[Row]
    def __init__(self, epoch: _Optional[int] = ..., snapshot: _Optional[bool] = ..., inserts: _Optional[_Iterable[_Union[Row, _Mapping]]] = ..., deletes: _Optional[_Iterable[_Union[Row, _Mapping]]] = ...) -> None: ...
