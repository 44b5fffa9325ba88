"""The command line's values: JSON rows and `attr=value` keys in, rows and relations out
(JSON has no bytes or CIDs: one-key objects stand for them, both ways)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from pathlib import Path

from pomoview.client import Cid
from pomoview.client.values import dict_to_row

BYTES_TAG = "$bytes"
CID_TAG = "$cid"

_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+)")


class UsageError(Exception):
    """Bad command-line input; reported like an argparse error (exit status 2)."""


# ---------------------------------------------------------------- value parsing


def _decode_json_value(name: str, value: object) -> object:
    """Turns a tagged object ({"$bytes": base64} / {"$cid": text}) into bytes / Cid."""
    if isinstance(value, dict) and len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == BYTES_TAG and isinstance(inner, str):
            try:
                return base64.b64decode(inner, validate=True)
            except ValueError:
                raise UsageError(f"attribute {name!r}: invalid base64 in {BYTES_TAG}") from None
        if tag == CID_TAG and isinstance(inner, str):
            return Cid(inner)
    if isinstance(value, dict | list) or value is None:
        raise UsageError(f"attribute {name!r}: unsupported JSON value {json.dumps(value)}")
    return value


def checked_row(row: dict[str, object], where: str) -> dict[str, object]:
    """Returns `row` once the client can encode it (e.g. ints within int64)."""
    try:
        dict_to_row(row)
    except (TypeError, ValueError) as err:
        raise UsageError(f"{where}: {err}") from None
    return row


def _row_from_json_object(obj: object, where: str) -> dict[str, object]:
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object, got {json.dumps(obj)}")
    return checked_row({name: _decode_json_value(name, v) for name, v in obj.items()}, where)


def parse_json_row(text: str, where: str) -> dict[str, object]:
    """Parses one JSON object into a row; integers stay ints, floats floats."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{where}: invalid JSON: {err}") from None
    return _row_from_json_object(obj, where)


def parse_scalar(text: str) -> object:
    """Parses a `name=value` value: int, float, true/false, "quoted" or bare string."""
    if _INT_RE.fullmatch(text):
        return int(text)
    if _FLOAT_RE.fullmatch(text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] == '"':
        # Lets a string that looks like a number be written, e.g. code="007".
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            return text
        return decoded if isinstance(decoded, str) else text
    return text


def parse_key(args: Sequence[str]) -> dict[str, object]:
    """Parses a lookup key: one JSON object, or `name=value` pairs."""
    if len(args) == 1 and args[0].lstrip().startswith("{"):
        return parse_json_row(args[0], "key")
    key: dict[str, object] = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or not name:
            raise UsageError(f"key: expected a JSON object or name=value pairs, got {arg!r}")
        if name in key:
            raise UsageError(f"key: attribute {name!r} given twice")
        key[name] = parse_scalar(value)
    return checked_row(key, "key")


def read_changes_file(path: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Reads JSON lines: {"insert": row}, {"delete": row}, or a bare row (an insert)."""
    inserts: list[dict[str, object]] = []
    deletes: list[dict[str, object]] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{where}: invalid JSON: {err}") from None
        if isinstance(obj, dict) and len(obj) == 1 and "insert" in obj:
            inserts.append(_row_from_json_object(obj["insert"], where))
        elif isinstance(obj, dict) and len(obj) == 1 and "delete" in obj:
            deletes.append(_row_from_json_object(obj["delete"], where))
        else:
            inserts.append(_row_from_json_object(obj, where))
    return inserts, deletes


def _to_json(value: object) -> object:
    """json.dumps default hook: bytes and Cid become their tagged objects."""
    if isinstance(value, bytes):
        return {BYTES_TAG: base64.b64encode(value).decode("ascii")}
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


def row_to_json(row: dict[str, object]) -> str:
    """Renders a row as one JSON line with sorted keys."""
    tagged = {k: {CID_TAG: str(v)} if isinstance(v, Cid) else v for k, v in row.items()}
    return json.dumps(tagged, sort_keys=True, default=_to_json)


def format_relation(rel: dict[str, object]) -> str:
    """One line per relation, e.g. `view v(id: int, n: int) key (id)`."""
    attrs = rel["attributes"]
    assert isinstance(attrs, list)
    cols = ", ".join(f"{a['name']}: {a['type']}" for a in attrs)
    kind = "view" if rel["is_view"] else str(rel["kind"])
    line = f"{kind} {rel['name']}({cols})"
    key = rel["key"]
    if isinstance(key, list) and key:
        line += f" key ({', '.join(str(k) for k in key)})"
    return line
