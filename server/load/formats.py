"""Reading and typing a bulk load's input formats (CSV, Parquet, JSON lines) as Spark columns:
each row's typed attributes and its first error, and the reason a refusal gives for that error
(see `bulk_load` for the load's passes and its `FILE:ROW` contract).

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
import os
from collections.abc import Mapping, Sequence
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

from pomoview.server.errors import InvalidArgument
from pomoview.server.spark.columns import column
from pomoview.server.types import SourceSchema

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

_PARQUET_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "int": (LongType, IntegerType, ShortType, ByteType),
    "float": (DoubleType, FloatType, LongType, IntegerType, ShortType, ByteType),
    "string": (StringType,),
    "bool": (BooleanType,),
    "bytes": (BinaryType,),
}
_SPARK_NAMES = {"int": "bigint", "float": "double", "string": "string", "bool": "boolean", "bytes": "binary"}
_ARTICLES = {"int": "an int", "float": "a float", "string": "a string", "bool": "a bool", "bytes": "bytes"}


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


def _first(*errors: Column) -> Column:
    return F.coalesce(*errors) if len(errors) > 1 else errors[0]


def _typed_lines(
    lines: DataFrame,
    values: Mapping[str, Column],
    attrs: Sequence[str],
    errors: Sequence[Column],
    keep: Sequence[str],
) -> DataFrame:
    """A text format's rows: the typed attributes, the line's own columns `keep` (its file
    metadata; its number where the lines were counted), its first error, and the raw line
    (to quote in a refusal)."""
    return lines.select(
        *(values[a].alias(a) for a in attrs),
        *keep,
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



def csv_rows(
    lines: DataFrame,
    heads: Mapping[str, str],
    options: dict[str, str],
    source: str,
    schema: SourceSchema,
    header_line: Column | None = None,
) -> DataFrame:
    """The typed rows of CSV `lines` (`value` and the line's own columns); `heads` is each
    file's first line, its header when the options say there is one, and `header_line` tells
    a header line from the others (by default, it is line 1 of numbered lines)."""
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
            names = parse_header(head, options)
            where = f"{display_path(file)}:1"
            check_header(names, attrs, source, where)
            if columns is None:
                columns = names
            elif names != columns:
                raise InvalidArgument(
                    f"{where}: the header ({', '.join(names)}) differs from the other files' "
                    f"({', '.join(columns)})"
                )
        order = columns if columns is not None else attrs
        first = F.col("_line") == 1 if header_line is None else header_line
        data = lines.where(~first & (F.col("value") != ""))
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
    keep = [c for c in lines.columns if c != "value"]
    fields = data.select("*", parsed.alias("_p"))
    values: dict[str, Column] = {}
    errors = [F.when(F.col("_p._corrupt").isNotNull(), _error("fields", None, None))]
    for i, name in enumerate(order):
        value, error = _from_text(F.col(f"_p._c{i}"), types[name], name)
        values[name] = value
        errors.append(error)
    return _typed_lines(fields, values, attrs, errors, keep)


def parse_header(text: str, options: dict[str, str]) -> list[str]:
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


def check_header(names: list[str], attrs: list[str], source: str, where: str) -> None:
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


def jsonl_rows(lines: DataFrame, source: str, schema: SourceSchema) -> DataFrame:
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
    return _typed_lines(data, values, attrs, errors, [c for c in lines.columns if c != "value"])


def parquet_frame(spark: SparkSession, path: str, schema: SourceSchema) -> DataFrame:
    """The Parquet file(s) at `path`, refused unless their columns are the source's attributes
    with types a load accepts."""
    df = spark.read.parquet(path)
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
    return df


def parquet_rows(spark: SparkSession, path: str, schema: SourceSchema) -> DataFrame:
    """The rows of the Parquet file(s) at `path`, numbered, with their first error."""
    df = parquet_frame(spark, path, schema)
    errors = [F.when(column(a).isNull(), _error("null", a, None)) for a, _ in schema]
    return df.select(
        *(column(a).cast(_SPARK_NAMES[t]).alias(a) for a, t in schema),
        F.col("_metadata.file_path").alias("_file"),
        (F.col("_metadata.row_index") + 1).alias("_line"),
        F.col("_metadata.file_size").alias("_size"),
        F.unix_micros(F.col("_metadata.file_modification_time")).alias("_mtime"),
        F.lit(False).alias("_changed"),
        _first(*errors).alias("_error"),
        F.lit(None).cast("string").alias("_raw"),
    )


def parquet_fast(df: DataFrame, schema: SourceSchema, marker: str) -> DataFrame:
    """The source's attributes from `parquet_frame`'s `df`, failing the job (`raise_error`
    with `marker`) at a null. A column that already has the attribute's type is not cast,
    and a column the file declares required is not checked: the read then costs what a
    plain copy does."""
    fields = {f.name: f for f in df.schema.fields}
    values = [
        column(a) if fields[a].dataType.simpleString() == _SPARK_NAMES[t] else column(a).cast(_SPARK_NAMES[t])
        for a, t in schema
    ]
    nullable = [column(a).isNull() for a, _ in schema if fields[a].nullable]
    if nullable:
        bad = nullable[0]
        for other in nullable[1:]:
            bad = bad | other
        first = F.when(bad, F.raise_error(F.lit(marker))).otherwise(values[0])
        values[0] = first.cast(_SPARK_NAMES[schema[0][1]])
    return df.select(*(v.alias(a) for v, (a, _) in zip(values, schema, strict=True)))


def fail_at_errors(checked: DataFrame, schema: SourceSchema, marker: str) -> DataFrame:
    """The source's attributes of a text format's typed rows, failing the job (`raise_error`
    with `marker`) at the first row with an error."""
    return fail_where(checked, F.col("_error").isNotNull(), schema, marker)


def fail_where(rows: DataFrame, bad: Column, schema: SourceSchema, marker: str) -> DataFrame:
    """The source's attributes of `rows`, typed as the store keeps them, failing the job
    (`raise_error` with `marker`) at the first row where `bad` holds."""
    attrs = [a for a, _ in schema]
    first = F.when(bad, F.raise_error(F.lit(marker))).otherwise(column(attrs[0]))
    return rows.select(
        first.cast(_SPARK_NAMES[schema[0][1]]).alias(attrs[0]), *(column(a) for a in attrs[1:])
    )


def reason(
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
