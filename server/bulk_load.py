"""Bulk import of a CSV, Parquet or JSON-lines file into a source, as Spark jobs (DESIGN §4).

`LoadJob.prepare` reads the file and checks every row against the source's schema without
taking any scheduler lock; the scheduler then commits the checked rows as one epoch
(`Scheduler.load`). A file with a row that does not fit is refused whole, naming the first
such row, `FILE:ROW: reason`, where ROW counts from 1 like an editor's line number: for CSV
and JSON lines the physical line (the CSV header is line 1, blank lines count), for Parquet
the row within its file. With a folder of files, FILE is the file holding that row and
"first" means in file-name order.

Passes over the input, each a Spark job in the load's job group (progress is read from
Spark's status tracker):

1. CSV and JSON lines only, *counting*: the lines of each file split (a "block" of a file),
   with the smallest `monotonically_increasing_id` in it. Ids are consecutive within a
   Spark partition and a block is never divided between partitions, so a line's number in
   its file is (lines in the file's earlier blocks) + (id - the block's smallest id) + 1.
   The same scan is planned the same way again in later passes, so the ids agree.
2. *validating*: parse and type every row; count rows per file and find the first error.
3. *writing*, run by the store under the scheduler's write lock: the same typed rows again.
   A row that does not fit, or a file whose size or modification time differs from what
   pass 2 saw, fails that job (`raise_error`), so a file edited during the load is refused
   rather than half loaded.

Values: CSV fields are text; an int is an optional sign and digits within 64 bits, a float
is a decimal or scientific number, `inf`, `infinity` or `nan`, a bool is `true` or `false`
(any case), a string is the field as is (an empty field is ""; a quote inside a quoted field
is doubled, as RFC 4180 has it). A CSV record is one line: a quoted field cannot hold a line
break. CSV cannot carry bytes.
JSON values must have their JSON type: an int is a JSON integer, a float any JSON number,
a bool `true`/`false`, a string a JSON string, bytes `{"$bytes": "<base64>"}` as in
`pomoview write`. Parquet columns must have the attribute's type (integer columns are
widened to int, integer and float columns to float) and no nulls.
"""

from __future__ import annotations

import csv
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from .errors import FailedPrecondition, InvalidArgument, ServiceError, Unavailable
from .spark_session import SparkSessionLost, spark_error_reason
from .types import SourceSchema

log = logging.getLogger("pomoview.load")

FORMATS = ("csv", "parquet", "jsonl")
_EXTENSIONS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
_COMPRESSED = (".gz", ".bz2", ".deflate", ".zst", ".lz4", ".snappy")
# CSV options a load accepts: ours (`header`) and the parser's, with their defaults.
# The escape is the quote: a quote inside a quoted field is doubled (RFC 4180, as spreadsheets
# and Python's csv module write it).
CSV_OPTIONS = {"header": "true", "delimiter": ",", "quote": '"', "escape": '"'}
_CSV_ALIASES = {"sep": "delimiter"}

_INT_RE = r"^[+-]?[0-9]+$"
_FLOAT_RE = r"^([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|(?i:[+-]?(inf|infinity|nan)))$"
_INT_VARIANTS = ("BIGINT", "INT", "SMALLINT", "TINYINT")
_BYTES_VARIANT = "OBJECT<`$bytes`: STRING>"
# Marks the failure of a write pass that met a row or a file it did not validate.
CHANGED_MARKER = "pomoview-load: the input changed after it was validated"

_PARQUET_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "int": (LongType, IntegerType, ShortType, ByteType),
    "float": (DoubleType, FloatType, LongType, IntegerType, ShortType, ByteType),
    "string": (StringType,),
    "bool": (BooleanType,),
    "bytes": (BinaryType,),
}
_SPARK_NAMES = {"int": "bigint", "float": "double", "string": "string", "bool": "boolean", "bytes": "binary"}
_ARTICLES = {"int": "an int", "float": "a float", "string": "a string", "bool": "a bool", "bytes": "bytes"}


@dataclass(frozen=True)
class Progress:
    """How far a load is: `fraction` of the whole in [0, 1]; the tasks of the current phase's
    Spark jobs; `rows`, the rows counted so far (0 until the file has been counted)."""

    phase: str  # "counting", "validating" or "writing"
    tasks_done: int
    tasks_total: int
    fraction: float
    rows: int


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class Prepared:
    """A validated file: `rows` is a DataFrame of the source's attributes, in declared order
    and typed as the store keeps them; evaluating it fails if the file has changed since."""

    rows: DataFrame
    count: int
    path: str


def resolve_format(path: str, fmt: str) -> str:
    """The format named, or the one the file's extension implies."""
    if fmt:
        if fmt not in FORMATS:
            raise InvalidArgument(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        return fmt
    name = PurePosixPath(urlsplit(path).path if "://" in path else path).name.lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    found = _EXTENSIONS.get(PurePosixPath(name).suffix)
    if found is None:
        raise InvalidArgument(
            f"{path}: cannot tell the format from the file name; name it ({', '.join(FORMATS)})"
        )
    return found


def check_path(path: str) -> None:
    """Refuses a relative path, and a local file that is missing or unreadable; other URIs
    are left to Spark."""
    if not path:
        raise InvalidArgument("no file to load was named")
    parts = urlsplit(path)
    if parts.scheme and parts.scheme != "file" and len(parts.scheme) > 1:
        return
    local = url2pathname(unquote(parts.path)) if parts.scheme == "file" else path
    if not os.path.isabs(local):
        raise InvalidArgument(
            f"{path}: the path must be absolute (the server resolves nothing against its own "
            "working folder)"
        )
    if not os.path.exists(local):
        raise InvalidArgument(f"{path}: no such file or folder")
    if not os.access(local, os.R_OK):
        raise InvalidArgument(f"{path}: not readable by the server")


def csv_options(options: Mapping[str, str]) -> dict[str, str]:
    out = dict(CSV_OPTIONS)
    for key, value in options.items():
        name = _CSV_ALIASES.get(key, key)
        if name not in CSV_OPTIONS:
            raise InvalidArgument(
                f"unknown CSV option {key!r}: the options are {', '.join(CSV_OPTIONS)}"
            )
        out[name] = value
    if out["header"].lower() not in ("true", "false"):
        raise InvalidArgument(f"CSV option header must be true or false, not {out['header']!r}")
    for name in ("delimiter", "quote", "escape"):
        if len(out[name]) != 1:
            raise InvalidArgument(f"CSV option {name} must be one character, not {out[name]!r}")
    return out


def display_path(file: str) -> str:
    """A file as Spark names it (a URI), shown as a plain path when it is local."""
    parts = urlsplit(file)
    if parts.scheme == "file":
        return url2pathname(unquote(parts.path))
    return file


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _first(*errors: Column) -> Column:
    return F.coalesce(*errors) if len(errors) > 1 else errors[0]


def _typed_lines(
    lines: DataFrame, values: Mapping[str, Column], attrs: Sequence[str], errors: Sequence[Column]
) -> DataFrame:
    """A text format's rows as `prepare` checks them: the typed attributes, the line's file
    metadata, its first error, and the raw line (to quote in a refusal)."""
    return lines.select(
        *(values[a].alias(a) for a in attrs),
        "_file",
        "_line",
        "_size",
        "_mtime",
        "_changed",
        _first(*errors).alias("_error"),
        F.col("value").alias("_raw"),
    )


def _error(problem: Column | str, attr: str | None, text: Column | None) -> Column:
    return F.struct(
        (F.lit(problem) if isinstance(problem, str) else problem).alias("problem"),
        F.lit(attr).cast("string").alias("attr"),
        (F.lit(None) if text is None else text).cast("string").alias("text"),
    )


def _from_text(text: Column, type_name: str, attr: str) -> tuple[Column, Column]:
    """A CSV field as `type_name`: (value, error or null)."""
    ok: Column
    if type_name == "int":
        value = text.try_cast("bigint")
        problem = F.when(~F.coalesce(text.rlike(_INT_RE), F.lit(False)), "type").when(
            value.isNull(), "range"
        )
        return value, F.when(problem.isNotNull(), _error(problem, attr, text))
    if type_name == "float":
        value = text.try_cast("double")
        ok = F.coalesce(text.rlike(_FLOAT_RE), F.lit(False)) & value.isNotNull()
    elif type_name == "bool":
        lower = F.lower(text)
        value = lower == F.lit("true")
        ok = F.coalesce(lower.isin("true", "false"), F.lit(False))
    elif type_name == "string":
        return F.coalesce(text, F.lit("")), F.lit(None)
    else:
        raise InvalidArgument(f"attribute {attr!r} is {type_name}, which CSV cannot hold")
    return value, F.when(~ok, _error("type", attr, text))


def _from_json(doc: Column, line: Column, type_name: str, attr: str) -> tuple[Column, Column]:
    """A JSON object's attribute as `type_name`: (value, error or null; absence is checked
    elsewhere)."""
    path = f"$.{attr}"
    item = F.try_variant_get(doc, path, "variant")
    kind = F.schema_of_variant(item)
    if type_name == "int":
        ok = kind.isin(*_INT_VARIANTS)
        value = F.try_variant_get(doc, path, "bigint")
    elif type_name == "float":
        ok = kind.isin("DOUBLE", "FLOAT", *_INT_VARIANTS) | kind.startswith("DECIMAL")
        value = F.try_variant_get(doc, path, "double")
    elif type_name == "string":
        ok = kind == F.lit("STRING")
        value = F.try_variant_get(doc, path, "string")
    elif type_name == "bool":
        ok = kind == F.lit("BOOLEAN")
        value = F.try_variant_get(doc, path, "boolean")
    elif type_name == "bytes":
        value = F.try_to_binary(F.try_variant_get(doc, f"$.{attr}['$bytes']", "string"), F.lit("base64"))
        ok = (kind == F.lit(_BYTES_VARIANT)) & value.isNotNull()
    else:
        raise InvalidArgument(f"attribute {attr!r} has type {type_name}, which a load cannot hold")
    # The variant keeps numbers as decimals (3.0 becomes 3): show the number as written.
    shown = F.when(
        kind.startswith("DECIMAL") | (kind == F.lit("DOUBLE")), F.get_json_object(line, path)
    ).otherwise(F.to_json(item))
    return value, F.when(item.isNotNull() & ~F.coalesce(ok, F.lit(False)), _error("type", attr, shown))


class LoadJob:
    """One load's Spark work: a job group that `cancelled` cancels, and a poller that turns the
    group's task counts into `Progress` reports. Use as a context manager, on the thread that
    runs the Spark actions (the job group is a property of that thread)."""

    def __init__(
        self,
        spark: SparkSession,
        report: ProgressFn | None = None,
        cancelled: threading.Event | None = None,
        interval: float = 0.25,
    ) -> None:
        self.spark = spark
        self.group = f"pomoview-load-{uuid.uuid4().hex}"
        self._report = report
        self._cancelled = cancelled
        self._interval = interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._phase = ("reading", 0.0, 0.0)
        self._before: set[int] = set()  # jobs of earlier phases
        self._fraction = 0.0
        self._last: tuple[str, int, int] | None = None
        self.rows = 0
        self.write_from = 0.5  # where the writing phase starts in the whole, set by `prepare`
        self._poller: threading.Thread | None = None

    def __enter__(self) -> LoadJob:
        self.spark.sparkContext.setJobGroup(self.group, "pomoview load", interruptOnCancel=True)
        self._poller = threading.Thread(target=self._poll, name="load-progress", daemon=True)
        self._poller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=5)
        try:
            self.spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            self.spark.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 (a dead session has nothing left to clear)
            log.debug("clearing the load's job group failed", exc_info=True)

    @property
    def cancelled(self) -> bool:
        return self._cancelled is not None and self._cancelled.is_set()

    @contextmanager
    def phase(self, name: str, start: float, end: float) -> Iterator[None]:
        """Reports the Spark jobs run inside as phase `name`, spanning [start, end] of the whole."""
        if self.cancelled:
            raise Unavailable("the load was cancelled")
        with self._lock:
            self._before = set(self._job_ids())
            self._phase = (name, start, end)
        self._send(0, 0)
        yield
        with self._lock:
            self._fraction = max(self._fraction, end)
        self._send(*self._tasks(), force=True)

    def _job_ids(self) -> list[int]:
        return list(self.spark.sparkContext.statusTracker().getJobIdsForGroup(self.group))

    def _tasks(self) -> tuple[int, int]:
        """(done, total) tasks of the current phase's jobs; a finished job counts whole (its
        skipped stages never report their tasks done)."""
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for job_id in self._job_ids():
            if job_id in self._before:
                continue
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is None:
                    continue
                total += stage.numTasks
                done += stage.numTasks if job.status == "SUCCEEDED" else stage.numCompletedTasks
        return done, total

    def _send(self, done: int, total: int, force: bool = False) -> None:
        with self._lock:
            name, start, end = self._phase
            if total:
                # A phase may start more jobs than it has shown yet: its end is reached only
                # when it ends.
                within = min(done / total, 0.95)
                self._fraction = max(self._fraction, start + (end - start) * within)
            else:
                self._fraction = max(self._fraction, start)
            key = (name, done, total)
            if (key == self._last and not force) or self._report is None:
                return
            self._last = key
            progress = Progress(name, done, total, min(self._fraction, 1.0), self.rows)
        try:
            self._report(progress)
        except Exception:  # noqa: BLE001 (a listener's failure must not stop the load)
            log.debug("progress report failed", exc_info=True)

    def _poll(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if self.cancelled:
                    self.spark.sparkContext.cancelJobGroup(self.group)
                    return
                self._send(*self._tasks())
            except Exception:  # noqa: BLE001 (progress is best effort; the load reports errors)
                log.debug("polling the load's progress failed", exc_info=True)

    # -- reading and checking --------------------------------------------------------------

    def prepare(
        self, path: str, fmt: str, options: Mapping[str, str], source: str, schema: SourceSchema
    ) -> Prepared:
        """Reads `path` and checks every row; raises InvalidArgument naming the first row that
        does not fit, FailedPrecondition if the file changes meanwhile, Unavailable if Spark
        fails. Changes nothing."""
        check_path(path)
        fmt = resolve_format(path, fmt)
        if fmt != "csv" and options:
            raise InvalidArgument(f"{fmt} takes no options (given: {', '.join(sorted(options))})")
        with self.failures(path):
            if fmt == "parquet":
                checked = self._parquet(path, schema)
                validating = (0.0, 0.5)
            else:
                lines, heads = self._numbered_lines(path)
                if fmt == "csv":
                    checked = self._csv(lines, heads, csv_options(options), source, schema)
                else:
                    checked = self._jsonl(lines, source, schema)
                validating = (0.3, 0.65)
            self.write_from = validating[1]
            with self.phase("validating", *validating):
                files = (
                    checked.groupBy("_file", "_size", "_mtime")
                    .agg(
                        F.count(F.lit(1)).alias("rows"),
                        F.min(
                            F.when(
                                F.col("_error").isNotNull(),
                                F.struct("_line", "_error", "_raw"),
                            )
                        ).alias("first"),
                        F.max(F.col("_changed").cast("int")).alias("changed"),
                    )
                    .collect()
                )
        if any(f["changed"] for f in files):
            raise self._changed(path)
        bad = sorted((f["_file"], f["first"]) for f in files if f["first"] is not None)
        if bad:
            file, first = bad[0]
            raise InvalidArgument(
                f"{display_path(file)}:{first['_line']}: {self._reason(first, fmt, source, schema, options)}"
            )
        self.rows = sum(int(f["rows"]) for f in files)
        expected = self.spark.createDataFrame(
            [(f["_file"], f["_size"], f["_mtime"]) for f in files],
            "_file string, _want_size bigint, _want_mtime bigint",
        )
        guarded = checked.join(F.broadcast(expected), on="_file", how="left")
        bad_row = (
            F.col("_changed")
            | F.col("_error").isNotNull()
            | F.col("_want_size").isNull()
            | (F.col("_size") != F.col("_want_size"))
            | (F.col("_mtime") != F.col("_want_mtime"))
        )
        attrs = [a for a, _ in schema]
        first = F.when(bad_row, F.raise_error(F.lit(CHANGED_MARKER))).otherwise(_col(attrs[0]))
        rows = guarded.select(
            first.cast(_SPARK_NAMES[schema[0][1]]).alias(attrs[0]), *(_col(a) for a in attrs[1:])
        )
        return Prepared(rows=rows, count=self.rows, path=path)

    def _changed(self, path: str) -> FailedPrecondition:
        return FailedPrecondition(f"{path} changed while it was being loaded; nothing was loaded")

    @contextmanager
    def failures(self, path: str) -> Iterator[None]:
        """Turns Spark's failures into service errors: a file Spark cannot read or parse is the
        caller's (INVALID_ARGUMENT), a file that changed under the load FAILED_PRECONDITION,
        anything else UNAVAILABLE."""
        try:
            yield
        except ServiceError:
            raise
        except Exception as err:  # noqa: BLE001 (sorted below; nothing else escapes)
            raise self.classify(err, path) from err

    def classify(self, err: BaseException, path: str) -> ServiceError:
        if self.cancelled:
            return Unavailable("the load was cancelled")
        if isinstance(err, SparkSessionLost):
            return Unavailable(f"the load failed: {err}")
        text = str(err)
        reason = spark_error_reason(err)
        if CHANGED_MARKER in text:
            return self._changed(path)
        unreadable = (
            "PATH_NOT_FOUND",
            "FAILED_READ_FILE",
            "CANNOT_READ_FILE_FOOTER",
            "is not a Parquet file",
            "FileNotFoundException",
            "AccessDeniedException",
            "UNABLE_TO_INFER_SCHEMA",
        )
        if any(u in text for u in unreadable):
            return InvalidArgument(f"{path}: cannot be read: {reason}")
        return Unavailable(f"the load of {path} failed in Spark: {reason}")

    def _numbered_lines(self, path: str) -> tuple[DataFrame, dict[str, str]]:
        """The lines of the file(s) at `path`: value, _file, _line (from 1), _size, _mtime and
        _changed (the file's blocks differ from those counted: it changed); and the first line
        of each file."""
        raw = self.spark.read.text(path).select(
            F.col("value"),
            F.col("_metadata.file_path").alias("_file"),
            F.col("_metadata.file_block_start").alias("_block"),
            F.col("_metadata.file_size").alias("_size"),
            F.unix_micros(F.col("_metadata.file_modification_time")).alias("_mtime"),
            F.monotonically_increasing_id().alias("_mid"),
        )
        with self.phase("counting", 0.0, 0.3):
            blocks = (
                raw.groupBy("_file", "_block")
                .agg(
                    F.min("_mid").alias("_first"),
                    F.count(F.lit(1)).alias("_n"),
                    F.min_by("value", "_mid").alias("_head"),
                )
                .collect()
            )
        heads = {b["_file"]: b["_head"] for b in blocks if b["_block"] == 0}
        table: list[tuple[str, int, int, int]] = []
        before: dict[str, int] = {}
        for b in sorted(blocks, key=lambda b: (b["_file"], b["_block"])):
            table.append((b["_file"], b["_block"], b["_first"], before.get(b["_file"], 0)))
            before[b["_file"]] = before.get(b["_file"], 0) + b["_n"]
        self.rows = sum(before.values())
        offsets = self.spark.createDataFrame(
            table or [("", -1, 0, 0)], "_file string, _block bigint, _first bigint, _before bigint"
        )
        joined = raw.join(F.broadcast(offsets), on=["_file", "_block"], how="left")
        lines = joined.select(
            "value",
            "_file",
            (F.col("_before") + F.col("_mid") - F.col("_first") + 1).alias("_line"),
            "_size",
            "_mtime",
            F.col("_before").isNull().alias("_changed"),
        )
        return lines, heads

    def _csv(
        self,
        lines: DataFrame,
        heads: Mapping[str, str],
        options: dict[str, str],
        source: str,
        schema: SourceSchema,
    ) -> DataFrame:
        types = dict(schema)
        attrs = [a for a, _ in schema]
        for a, t in schema:
            if t not in ("int", "float", "string", "bool"):
                raise InvalidArgument(
                    f"source {source!r} has the {t} attribute {a!r}, which CSV cannot hold; "
                    "load it from Parquet or JSON lines"
                )
        header = options["header"].lower() == "true"
        if header:
            columns: list[str] | None = None
            for file, head in sorted(heads.items()):
                names = self._parse_header(head, options)
                where = f"{display_path(file)}:1"
                self._check_header(names, attrs, source, where)
                if columns is None:
                    columns = names
                elif names != columns:
                    raise InvalidArgument(
                        f"{where}: the header ({', '.join(names)}) differs from the other files' "
                        f"({', '.join(columns)})"
                    )
            order = columns if columns is not None else attrs
            self.rows -= len(heads)
            data = lines.where((F.col("_line") != 1) & (F.col("value") != ""))
        else:
            order = attrs
            data = lines.where(F.col("value") != "")
        ddl = ", ".join(f"_c{i} STRING" for i in range(len(order))) + ", _corrupt STRING"
        parsed = F.from_csv(
            F.col("value"),
            ddl,
            {
                "sep": options["delimiter"],
                "quote": options["quote"],
                "escape": options["escape"],
                "mode": "PERMISSIVE",
                "columnNameOfCorruptRecord": "_corrupt",
            },
        )
        fields = data.select("*", parsed.alias("_p"))
        values: dict[str, Column] = {}
        errors = [F.when(F.col("_p._corrupt").isNotNull(), _error("fields", None, None))]
        for i, name in enumerate(order):
            value, error = _from_text(F.col(f"_p._c{i}"), types[name], name)
            values[name] = value
            errors.append(error)
        return _typed_lines(fields, values, attrs, errors)

    @staticmethod
    def _parse_header(text: str, options: dict[str, str]) -> list[str]:
        text = text.removeprefix("\ufeff")  # a byte-order mark is not part of the first name
        try:
            rows = list(
                csv.reader(
                    [text],
                    delimiter=options["delimiter"],
                    quotechar=options["quote"],
                    escapechar=None if options["escape"] == options["quote"] else options["escape"],
                )
            )
        except csv.Error as err:
            raise InvalidArgument(f"the header line cannot be parsed: {err}") from None
        return rows[0] if rows else []

    @staticmethod
    def _check_header(names: list[str], attrs: list[str], source: str, where: str) -> None:
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise InvalidArgument(f"{where}: column {n!r} appears twice in the header")
            seen.add(n)
        missing = [a for a in attrs if a not in seen]
        extra = [n for n in names if n not in attrs]
        problems = []
        if missing:
            problems.append(f"missing column {', '.join(repr(a) for a in missing)}")
        if extra:
            problems.append(f"unknown column {', '.join(repr(n) for n in extra)}")
        if problems:
            raise InvalidArgument(
                f"{where}: {'; '.join(problems)} (source {source!r} has {', '.join(attrs)}; "
                "without a header line, pass the option header=false)"
            )

    def _jsonl(self, lines: DataFrame, source: str, schema: SourceSchema) -> DataFrame:
        attrs = [a for a, _ in schema]
        data = lines.where(F.trim(F.col("value")) != "")
        doc = F.try_parse_json(F.col("value"))
        keys = F.json_object_keys(F.col("value"))
        extra = F.array_except(keys, F.array(*(F.lit(a) for a in attrs)))
        errors = [
            F.when(doc.isNull(), _error("json", None, None)),
            F.when(keys.isNull(), _error("object", None, None)),
            F.when(F.size(extra) > 0, _error("extra", None, F.element_at(extra, 1))),
        ]
        errors += [F.when(~F.array_contains(keys, a), _error("missing", a, None)) for a in attrs]
        values: dict[str, Column] = {}
        for a, t in schema:
            value, error = _from_json(doc, F.col("value"), t, a)
            values[a] = value
            errors.append(error)
        return _typed_lines(data, values, attrs, errors)

    def _parquet(self, path: str, schema: SourceSchema) -> DataFrame:
        df = self.spark.read.parquet(path)
        columns = {f.name: f.dataType for f in df.schema.fields}
        attrs = [a for a, _ in schema]
        missing = [a for a in attrs if a not in columns]
        extra = [c for c in columns if c not in attrs]
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing column {', '.join(repr(a) for a in missing)}")
            if extra:
                problems.append(f"unknown column {', '.join(repr(c) for c in extra)}")
            raise InvalidArgument(f"{path}: {'; '.join(problems)} (the source has {', '.join(attrs)})")
        for a, t in schema:
            if not isinstance(columns[a], _PARQUET_TYPES[t]):
                raise InvalidArgument(
                    f"{path}: column {a!r} holds {columns[a].simpleString()}, but the attribute "
                    f"is {t}"
                )
        errors = [F.when(_col(a).isNull(), _error("null", a, None)) for a in attrs]
        return df.select(
            *(_col(a).cast(_SPARK_NAMES[t]).alias(a) for a, t in schema),
            F.col("_metadata.file_path").alias("_file"),
            (F.col("_metadata.row_index") + 1).alias("_line"),
            F.col("_metadata.file_size").alias("_size"),
            F.unix_micros(F.col("_metadata.file_modification_time")).alias("_mtime"),
            F.lit(False).alias("_changed"),
            _first(*errors).alias("_error"),
            F.lit(None).cast("string").alias("_raw"),
        )

    @staticmethod
    def _reason(
        first: Any, fmt: str, source: str, schema: SourceSchema, options: Mapping[str, str]
    ) -> str:
        error = first["_error"]
        problem, attr, text = error["problem"], error["attr"], error["text"]
        types = dict(schema)
        if problem == "fields":
            opts = csv_options(options)
            try:
                reader = csv.reader([first["_raw"]], delimiter=opts["delimiter"], quotechar=opts["quote"])
                n = len(next(reader))
            except (csv.Error, StopIteration):
                n = -1
            has = f"has {n} fields" if n >= 0 else "has the wrong number of fields"
            return f"{has}, expected {len(schema)}"
        if problem == "json":
            return "not valid JSON (or a key appears twice)"
        if problem == "object":
            return "not a JSON object"
        if problem == "extra":
            return f"unknown attribute {text!r} (source {source!r} has {', '.join(types)})"
        if problem == "missing":
            return f"missing attribute {attr!r}"
        if problem == "null":
            return f"attribute {attr!r} is null"
        shown = _shorten(text if fmt == "jsonl" else repr(text if text is not None else ""))
        if problem == "range":
            return f"attribute {attr!r}: {shown} is outside the 64-bit int range"
        expected = _ARTICLES[types[attr]]
        if types[attr] == "bytes":
            expected += ' ({"$bytes": "<base64>"})'
        return f"attribute {attr!r}: {shown} is not {expected}"


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

