"""Bulk import of a CSV, Parquet or JSON-lines file into a source, as Spark jobs (DESIGN §4).

A file with a row that does not fit is refused whole, naming the first such row,
`FILE:ROW: reason`, where ROW counts from 1 like an editor's line number: for CSV and JSON
lines the physical line (the CSV header is line 1, blank lines count), for Parquet the row
within its file. With a folder of files, FILE is the file holding that row and "first" means
in file-name order.

One pass (`plan`, then `run`), a Spark job in the load's job group (progress is read from
Spark's status tracker), *writing*: it parses and types every row and the store writes them
as an unpublished part (`SourceStore.stage_load`), while an `Observation` counts the rows.
Numbering rows would take a pass of its own, so this one does not: a row that does not fit
fails the job (`raise_error` with `BAD_MARKER`) and the part is deleted; the scheduler then
publishes nothing and calls `refusal`, which finds the first bad row with the slow pass below.
A file changed during the load is refused: the stamps (size, modification time) of the files
Spark read are taken before Spark lists them and again after the pass (`load.files`). A CSV
header is line 1 of each file, which the pass cannot tell by number: it takes the lines of a
file's first block that have the text of its first line (read on the driver), and counts them;
more than one per file (a data line equal to the header) makes `run` discard the part and
load the file the slow way.

The slow pass (`prepare`), which numbers the rows:

1. CSV and JSON lines only, *counting*: the lines of each file split (a "block" of a file),
   with the smallest `monotonically_increasing_id` in it. Ids are consecutive within a
   Spark partition and a block is never divided between partitions, so a line's number in
   its file is (lines in the file's earlier blocks) + (id - the block's smallest id) + 1.
   The same scan is planned the same way again in later passes, so the ids agree.
2. *validating*: parse and type every row; count rows per file and find the first error.
3. (only to load a CSV file whose header text recurs) *writing*: the same typed rows again.
   A row that does not fit, or a file whose size or modification time differs from what
   pass 2 saw, fails that job (`raise_error`), so a file edited during the load is refused
   rather than half loaded.

How each format is read and typed, and the values it accepts: `load.formats`.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from pomoview.server.errors import FailedPrecondition, InvalidArgument, ServiceError, Unavailable
from pomoview.server.load.files import FileKey, InputFiles, Stamp, file_key
from pomoview.server.load.formats import (
    check_path,
    csv_options,
    csv_rows,
    display_path,
    fail_at_errors,
    fail_where,
    jsonl_rows,
    parquet_fast,
    parquet_frame,
    parquet_rows,
    reason,
    resolve_format,
)
from pomoview.server.spark.session import SparkSessionLost, spark_error_reason
from pomoview.server.types import SourceSchema

__all__ = [
    "BAD_MARKER",
    "CHANGED_MARKER",
    "BadInput",
    "LoadJob",
    "Plan",
    "Prepared",
    "Progress",
    "ProgressFn",
    "check_path",
    "csv_options",
    "resolve_format",
]

log = logging.getLogger("pomoview.load")

# Marks the failure of a write pass that met a row or a file it did not validate.
CHANGED_MARKER = "pomoview-load: the input changed after it was validated"
# Marks the failure of the one pass at a row that does not fit.
BAD_MARKER = "pomoview-load: a row does not fit its source"

T = TypeVar("T")


class BadInput(Exception):
    """The one pass met a row that does not fit: `LoadJob.refusal` finds out which."""


@dataclass(frozen=True)
class Progress:
    """How far a load is: `fraction` of the whole in [0, 1]; the tasks of the current phase's
    Spark jobs; `rows`, the rows counted so far (0 until the file has been counted)."""

    phase: str  # "writing" (the one pass); "counting", "validating" (the slow pass)
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


@dataclass
class Plan:
    """A load's one pass, planned: `rows` are the source's attributes, typed as the store
    keeps them, read from the files Spark listed (`inputs`); evaluating them fails the job
    (`BAD_MARKER`) at a row that does not fit. `observation` counts the rows (and, for CSV
    with a header, the lines taken for headers)."""

    path: str
    fmt: str
    options: dict[str, str]
    source: str
    schema: SourceSchema
    rows: DataFrame
    observation: Observation
    before: dict[FileKey, Stamp]
    inputs: list[FileKey] = field(default_factory=list)
    heads: int | None = None  # files with a header line, for CSV with a header


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

    # -- the one pass ----------------------------------------------------------------------

    def plan(
        self, path: str, fmt: str, options: Mapping[str, str], source: str, schema: SourceSchema
    ) -> Plan:
        """Plans the load's one pass over `path` without running it (no Spark job, but for
        the Parquet footers Spark reads for the schema). Raises InvalidArgument for a file
        that cannot be read or whose columns or CSV header do not fit, Unavailable if Spark
        fails."""
        check_path(path)
        fmt = resolve_format(path, fmt)
        if fmt != "csv" and options:
            raise InvalidArgument(f"{fmt} takes no options (given: {', '.join(sorted(options))})")
        observation = Observation(f"{self.group}-rows")
        heads: int | None = None
        with self.failures(path):
            files = InputFiles(self.spark, path)
            # Before Spark lists the files: see `load.files`.
            before = files.stamps()
            if fmt == "parquet":
                df = parquet_frame(self.spark, path, schema)
                observed = df.observe(observation, F.count(F.lit(1)).alias("rows"))
                rows = parquet_fast(observed, schema, BAD_MARKER)
                inputs = df.inputFiles()
            else:
                lines = self.spark.read.text(path).select(
                    "value", F.col("_metadata.file_block_start").alias("_block")
                )
                inputs = lines.inputFiles()
                if fmt == "csv":
                    checked, heads = _csv_one_pass(lines, files, inputs, options, source, schema, observation)
                else:
                    observed = lines.observe(
                        observation, F.count_if(F.trim(F.col("value")) != "").alias("rows")
                    )
                    checked = jsonl_rows(observed, source, schema)
                rows = fail_at_errors(checked, schema, BAD_MARKER)
        return Plan(
            path=path,
            fmt=fmt,
            options=dict(options),
            source=source,
            schema=schema,
            rows=rows,
            observation=observation,
            before=before,
            inputs=[file_key(uri) for uri in inputs],
            heads=heads,
        )

    def run(
        self, plan: Plan, write: Callable[[DataFrame], T], discard: Callable[[T], None]
    ) -> tuple[T, int]:
        """The one pass: `write(plan.rows)` (the store writes them as an unpublished part),
        then the checks that need the pass done; returns (what `write` returned, rows read).

        Raises BadInput if a row does not fit (`write` must leave nothing behind when it
        raises), FailedPrecondition if a file changed during the pass, and what `failures`
        turns other errors into. When it raises after `write` returned, it has called
        `discard` on the result. CSV whose header text recurs in a file's first block is
        read again the slow way (`prepare`: rows numbered, then written)."""
        result = self._write(plan.path, write, plan.rows)
        try:
            count = self._verify(plan)
        except BaseException:
            discard(result)
            raise
        if count is None:
            log.info("the load of %s reads its file again, numbering the lines", plan.path)
            discard(result)
            prepared = self.prepare(plan.path, plan.fmt, plan.options, plan.source, plan.schema)
            result, count = self._write(plan.path, write, prepared.rows), prepared.count
        self.rows = count
        return result, count

    def distinct_keys(self, plan: Plan, positions: tuple[int, ...]) -> set[tuple[Any, ...]]:
        """The distinct values the planned rows hold at the attributes in `positions` (one
        Spark job over the file, after the pass validated it), as the dataflow's keys."""
        if not positions:
            return {()} if plan.rows.limit(1).count() else set()
        columns = [plan.rows.columns[i] for i in positions]
        return {
            tuple(bytes(v) if isinstance(v, bytearray) else v for v in row)
            for row in plan.rows.select(*columns).distinct().collect()
        }

    def _write(self, path: str, write: Callable[[DataFrame], T], rows: DataFrame) -> T:
        try:
            return write(rows)
        except Exception as err:
            if not self.cancelled and _caused_by(err, BAD_MARKER):
                raise BadInput(path) from err
            if isinstance(err, ServiceError):
                raise
            raise self.classify(err, path) from err

    def _verify(self, plan: Plan) -> int | None:
        """After a pass that went through: the rows it read, or None if the CSV header lines
        it dropped were more than one per file, or its counts are missing. FailedPrecondition
        if a file changed."""
        if self._changed_files(plan):
            raise self._changed(plan.path)
        metrics = _observed(plan.observation)
        if metrics is None or (plan.heads is not None and int(metrics["heads"]) != plan.heads):
            return None
        return int(metrics["rows"])

    def _changed_files(self, plan: Plan) -> bool:
        with self.failures(plan.path):
            after = InputFiles(self.spark, plan.path).stamps()
        return any(plan.before.get(k) is None or plan.before.get(k) != after.get(k) for k in plan.inputs)

    def refusal(self, plan: Plan) -> ServiceError:
        """Why the pass raised BadInput: a file that changed, else the first row that does not
        fit, found by a pass of its own that numbers the rows (`prepare`)."""
        try:
            if self._changed_files(plan):
                return self._changed(plan.path)
            self.prepare(plan.path, plan.fmt, plan.options, plan.source, plan.schema)
        except ServiceError as err:
            return err
        # Every row fits now: the file was replaced since the pass.
        return self._changed(plan.path)

    # -- reading and checking, rows numbered: the slow path ------------------------------

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
                checked = parquet_rows(self.spark, path, schema)
                validating = (0.0, 0.5)
            else:
                lines, heads = self._numbered_lines(path)
                if fmt == "csv":
                    checked = csv_rows(lines, heads, csv_options(options), source, schema)
                    if csv_options(options)["header"].lower() == "true":
                        self.rows -= len(heads)
                else:
                    checked = jsonl_rows(lines, source, schema)
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
                f"{display_path(file)}:{first['_line']}: {reason(first, fmt, source, schema, options)}"
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
        rows = fail_where(guarded, bad_row, schema, CHANGED_MARKER)
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
            "UnsupportedFileSystemException",  # a URI scheme no file system serves
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


def _csv_one_pass(
    lines: DataFrame,
    files: InputFiles,
    inputs: list[str],
    options: Mapping[str, str],
    source: str,
    schema: SourceSchema,
    observation: Observation,
) -> tuple[DataFrame, int | None]:
    """The one pass's typed rows of a CSV load's `lines` (value, _block) from the files
    `inputs`, counted by `observation`; and how many header lines the pass should take (None
    without a header)."""
    opts = csv_options(options)
    first = {uri: files.first_line(uri) for uri in inputs}
    found = {uri: line for uri, line in first.items() if line is not None}
    header = opts["header"].lower() == "true"
    # Line 1 of a file is in its first block; a later line of that block with the same text
    # would be taken too, which the count of header lines shows (`run` then numbers the lines
    # to tell them apart).
    head = (
        (F.col("_block") == 0) & F.col("value").isin(*set(found.values()))
        if header and found
        else F.lit(False)
    )
    observed = lines.withColumn("_head", head).observe(
        observation,
        F.count_if(~F.col("_head") & (F.col("value") != "")).alias("rows"),
        F.count_if(F.col("_head")).alias("heads"),
    )
    heads = len(found) if header else None
    return csv_rows(observed, found if header else {}, opts, source, schema, F.col("_head")), heads


def _caused_by(err: BaseException | None, marker: str) -> bool:
    """Whether `err`, or an error it was raised from, carries `marker` (a store's write error
    wraps Spark's)."""
    while err is not None:
        if marker in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def _observed(observation: Observation) -> dict[str, Any] | None:
    """An observation's metrics, or None when the job left none: Spark's adaptive execution
    replaces a plan whose shuffle turned out empty, and the counting node with it."""
    row = observation._jo.getRow() if observation._jo is not None else None
    if row is None or row.size() == 0:
        return None
    return observation.get
