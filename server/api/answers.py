"""A lookup's answer on the wire, in its two forms, built from bytes cached per key.

- Rows (`LookupResponse.results`, for clients that do not ask for columns): a key's rows are
  one serialized `KeyRows`; the response frames each key's as field 1, then the epoch.
- Columns (`LookupRequest.columnar`): a key's rows are cached as fragments, one per attribute,
  each the serialized typed message of its values (`Column.Ints`, ...), plus the key's row
  count as a varint. A response concatenates, per attribute, the fragments of its keys in
  request order (repeated fields concatenate on the wire: a packed run after another, a string
  after another, read as one list), frames each as the `Column` of that attribute, and the
  counts as the packed `row_counts`. So a hit's answer is joins of cached bytes, as the row
  form's is, and the client decodes a column per attribute instead of a message per value.

Every value of every answer goes through here once per version of its key's rows (the
readers cache the encodings, `Reader.encoded_all`), not once per read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pomoview.planner.frontend.values import coerce
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

# (attribute, PomoLogic type) in the view's declared order.
Typed = Sequence[tuple[str, str]]
RowEncoder = Callable[[list[tuple[object, ...]]], bytes]
# A key's columnar fragments: its row count as a varint, then one fragment per attribute.
Fragments = tuple[bytes, ...]

_FIELDS = {
    "int": "int_value",
    "float": "float_value",
    "string": "string_value",
    "bool": "bool_value",
    "bytes": "bytes_value",
    "cid": "cid_value",
}
# Each type's message of values in a `Column`.
_VALUES: dict[str, Any] = {
    "int": pb.Column.Ints,
    "float": pb.Column.Floats,
    "string": pb.Column.Strings,
    "bool": pb.Column.Bools,
    "bytes": pb.Column.Bytes,
    "cid": pb.Column.Cids,
}
_TAG_LEN = 2  # the wire type of a length-delimited field
# The name of each form's cache in the readers (`Reader.encoded_all`), by LookupRequest.columnar.
FORMS = {False: "rows", True: "columns"}


def varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def _tag(number: int) -> bytes:
    return varint(number << 3 | _TAG_LEN)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited field: its tag, its length, its bytes."""
    return _tag(number) + varint(len(data)) + data


def answer_value(value: object, type_name: str) -> object:
    """An answer's value as its attribute's type. The dataflow's values have their
    attribute's type but in one case, an int where a float is declared (the sum of an empty
    group is 0), which values.coerce turns into that float."""
    if type_name == "float" and type(value) is not float:
        return coerce(value, type_name, "an answer", allow_nan=True)
    return value


def to_value(value: object, type_name: str) -> pb.Value:
    """An answer's value as the wire's Value of its attribute's type."""
    # The field is the type's, chosen at run time, which mypy cannot match to the value's
    # type; protobuf checks the value against the field and raises TypeError on a mismatch.
    return pb.Value(**{_FIELDS[type_name]: answer_value(value, type_name)})  # type: ignore[arg-type]


def row_encoder(typed: Typed) -> RowEncoder:
    """Encodes one key's rows (tuples in the view's attribute order) as a KeyRows message."""

    def encode(rows: list[tuple[object, ...]]) -> bytes:
        return pb.KeyRows(
            rows=[
                pb.Row(fields={a: to_value(v, t) for (a, t), v in zip(typed, row, strict=True)})
                for row in rows
            ]
        ).SerializeToString()

    return encode


def lookup_response_bytes(results: list[bytes], epoch: int) -> bytes:
    """A serialized LookupResponse from serialized KeyRows: field 1 (results), length
    delimited, once per key; then field 2 (epoch), a varint (omitted at 0, as proto3 does)."""
    parts = [b"\x0a" + varint(len(data)) + data for data in results]
    if epoch:
        parts.append(b"\x10" + varint(epoch))
    return b"".join(parts)


class RowAnswer:
    """One view's answers in rows: `encode` makes a key's KeyRows (cached by the reader),
    `response` a LookupResponse of the keys'."""

    form = FORMS[False]

    def __init__(self, typed: Typed) -> None:
        self.encode = row_encoder(typed)

    def response(self, keys: list[Any], epoch: int) -> bytes:
        """`keys` are what `encode` made."""
        return lookup_response_bytes(keys, epoch)


class ColumnEncoder:
    """One view's columnar answers: `encode` makes a key's fragments (cached by the reader),
    `response` a LookupResponse of the keys' fragments. Only for a view whose attributes all
    have one of the six types (`fits`): an attribute nothing types (`any`, the result of a
    user-defined aggregate) has no column type, and such a view is answered in rows."""

    form = FORMS[True]

    @staticmethod
    def fits(typed: Typed) -> bool:
        return all(t in _VALUES for _, t in typed)

    def __init__(self, typed: Typed) -> None:
        self.types = [t for _, t in typed]
        self.messages = [_VALUES[t] for t in self.types]
        column = pb.Column.DESCRIPTOR.fields_by_name
        # Each Column's bytes before its values' length: its name, then its oneof case's tag.
        self.heads = [
            _field(column["name"].number, a.encode()) + _tag(column[f"{t}_values"].number) for a, t in typed
        ]
        fields = pb.LookupResponse.DESCRIPTOR.fields_by_name
        self.columns_tag = _tag(fields["columns"].number)
        self.counts_tag = _tag(fields["row_counts"].number)
        self.empty = self._fragments(b"\x00", [b""] * len(self.types))

    def encode(self, rows: list[tuple[object, ...]]) -> Fragments:
        """A key's fragments: its row count (a varint), a fragment per attribute, and last
        the answer of this key alone but its epoch (most lookups ask one key)."""
        if not rows:
            return self.empty
        # An int where a float is declared (the sum of an empty group, see `answer_value`)
        # goes into `Column.Floats` as that float, as protobuf converts it.
        columns = zip(*rows, strict=True)
        out = [
            message(values=values).SerializeToString()
            for message, values in zip(self.messages, columns, strict=True)
        ]
        return self._fragments(varint(len(rows)), out)

    def _fragments(self, count: bytes, values: list[bytes]) -> Fragments:
        return (count, *values, self._body([count], list(zip(*[values], strict=True))))

    def _body(self, counts: Sequence[bytes], fields: list[tuple[bytes, ...]]) -> bytes:
        """The columns (field 3) and row counts (field 4) of keys whose counts are `counts`
        and whose fragments of attribute j are `fields[j]`."""
        columns = []
        for head, fragments in zip(self.heads, fields, strict=True):
            values = b"".join(fragments)
            column = b"".join((head, varint(len(values)), values))
            columns.append(b"".join((b"\x0a", varint(len(column)), column)))
        body = b"".join(columns)
        counts_bytes = b"".join(counts)
        columns_field = (self.columns_tag, varint(len(body)), body)
        return b"".join((*columns_field, self.counts_tag, varint(len(counts_bytes)), counts_bytes))

    def response(self, keys: list[Any], epoch: int) -> bytes:
        """The serialized LookupResponse of `keys`' fragments (what `encode` made), in
        order: the epoch (field 2, omitted at 0), the columns (3) and the row counts (4),
        always both."""
        if len(keys) == 1:
            body = keys[0][-1]
        else:
            fields: list[tuple[bytes, ...]] = [()] * len(self.empty)
            if keys:
                fields = list(zip(*keys, strict=True))
            body = self._body(fields[0], fields[1:-1])
        return b"".join((b"\x10", varint(epoch), body)) if epoch else body


def answer_of(typed: Typed, columnar: bool) -> RowAnswer | ColumnEncoder:
    """The encoder of a view's answers in rows or in columns; in rows for a view that does
    not fit columns (`ColumnEncoder.fits`)."""
    return ColumnEncoder(typed) if columnar and ColumnEncoder.fits(typed) else RowAnswer(typed)
