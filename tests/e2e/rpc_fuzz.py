"""Hostile requests for every ViewService RPC: raw calls, hand-encoded protobuf and
hypothesis strategies (used by test_bad_input.py against one real server)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import grpc
from hypothesis import strategies as st

from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

SERVICE = "/pomoview.v1.ViewService/"
# The codes a refusal may carry; INTERNAL, UNKNOWN, DEADLINE_EXCEEDED and UNAVAILABLE are
# never right for bad input (a crash, a hang, a server gone).
_REFUSALS = {
    "Install": ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNIMPLEMENTED", "FAILED_PRECONDITION"),
    "Write": ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "NOT_FOUND", "FAILED_PRECONDITION"),
    "Lookup": ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "NOT_FOUND", "OUT_OF_RANGE"),
    "Describe": ("INVALID_ARGUMENT", "NOT_FOUND"),
    "Stats": ("INVALID_ARGUMENT",),
    "Evict": ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "NOT_FOUND", "FAILED_PRECONDITION"),
    "Load": ("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "NOT_FOUND", "FAILED_PRECONDITION"),
}
ALLOWED: dict[str, set[grpc.StatusCode]] = {
    method: {grpc.StatusCode.OK, *(getattr(grpc.StatusCode, c) for c in codes)}
    for method, codes in _REFUSALS.items()
}

# Fuzz cases sent per RPC in this run (the "fuzz cases run"), the status codes they
# got, and the slowest answer per RPC.
CASES: Counter[str] = Counter()
CODES: Counter[tuple[str, str]] = Counter()
SLOWEST: dict[str, tuple[float, str]] = {}


def record(method: str, outcome: Outcome, request: bytes) -> None:
    CASES[method] += 1
    CODES[(method, outcome.code.name)] += 1
    if outcome.seconds > SLOWEST.get(method, (0.0, ""))[0]:
        SLOWEST[method] = (outcome.seconds, f"{outcome.code.name} {request[:60]!r} {outcome.details[:80]!r}")


@dataclass(frozen=True)
class Outcome:
    code: grpc.StatusCode
    details: str
    seconds: float
    reply: bytes = b""  # the serialized response (the last message of a stream)


def call(channel: grpc.Channel, method: str, request: bytes, timeout: float) -> Outcome:
    """Sends `request` (serialized, possibly malformed) to `method`, with a deadline."""
    start = time.monotonic()
    try:
        if method == "Load":
            replies = list(channel.unary_stream(SERVICE + method)(request, timeout=timeout))
            reply = replies[-1] if replies else b""
        else:
            reply = channel.unary_unary(SERVICE + method)(request, timeout=timeout)
    except grpc.RpcError as err:
        return Outcome(err.code(), err.details() or "", time.monotonic() - start)  # type: ignore[attr-defined]
    return Outcome(grpc.StatusCode.OK, "", time.monotonic() - start, reply)


def check(outcome: Outcome, method: str, timeout: float) -> None:
    """A clear status within the deadline, with a message when it is a refusal."""
    assert outcome.code in ALLOWED[method], (method, outcome)
    assert outcome.seconds < timeout, (method, outcome)
    if outcome.code != grpc.StatusCode.OK:
        assert outcome.details.strip(), (method, outcome)


# ------------------------------------------------------------------ hand-encoded protobuf


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, data: bytes) -> bytes:
    """A length-delimited field (strings, bytes, messages, map entries)."""
    return varint(number << 3 | 2) + varint(len(data)) + data


def int_field(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def raw_row(*entries: tuple[bytes, bytes]) -> bytes:
    """A Row from (attribute name, serialized Value) entries, duplicates kept as given."""
    return b"".join(field(1, field(1, name) + field(2, value)) for name, value in entries)


# ------------------------------------------------------------------ hypothesis strategies

KNOWN = 77  # the seeded article: fuzz writes never touch it, so its answer must not change
ATTRIBUTES = ["id", "title", "article_id", "user_id", "votes", ""]
SOURCES = ["article", "vote", "articleWithVotes", "", "nosuch"]
VIEWS = ["articleWithVotes", "article", "vote", "", "noSuchView"]

huge_text = st.sampled_from([1 << 10, 1 << 20]).map(lambda n: "\u00e9" * n)
values = st.one_of(
    st.integers(-(2**63), 2**63 - 1).filter(lambda v: v != KNOWN).map(lambda v: pb.Value(int_value=v)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda v: pb.Value(float_value=v)),
    st.one_of(st.text(max_size=30), huge_text).map(lambda v: pb.Value(string_value=v)),
    st.booleans().map(lambda v: pb.Value(bool_value=v)),
    st.binary(max_size=40).map(lambda v: pb.Value(bytes_value=v)),
    st.text(max_size=60).map(lambda v: pb.Value(cid_value=v)),
    st.just(pb.Value()),  # no kind set
)
attributes = st.one_of(st.sampled_from(ATTRIBUTES), st.text(max_size=20))
rows = st.dictionaries(attributes, values, max_size=4).map(lambda f: pb.Row(fields=f))

write_requests = st.lists(
    st.builds(
        pb.SourceChanges,
        source=st.one_of(st.sampled_from(SOURCES), st.text(max_size=20)),
        inserts=st.lists(rows, max_size=4),
        deletes=st.lists(rows, max_size=2),
    ),
    max_size=3,
).map(lambda changes: pb.WriteRequest(changes=changes))


# A typed column's values (its oneof case and message), of any length, or none set.
column_values = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4).map(
        lambda v: {"int_values": pb.Column.Ints(values=v)}
    ),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4).map(
        lambda v: {"float_values": pb.Column.Floats(values=v)}
    ),
    st.lists(st.text(max_size=30), max_size=4).map(lambda v: {"string_values": pb.Column.Strings(values=v)}),
    st.lists(st.booleans(), max_size=4).map(lambda v: {"bool_values": pb.Column.Bools(values=v)}),
    st.lists(st.binary(max_size=40), max_size=4).map(lambda v: {"bytes_values": pb.Column.Bytes(values=v)}),
    st.lists(st.text(max_size=60), max_size=4).map(lambda v: {"cid_values": pb.Column.Cids(values=v)}),
    st.just({}),
)
columns = st.lists(
    st.builds(lambda name, values: pb.Column(name=name, **values), attributes, column_values), max_size=3
).map(lambda c: pb.Columns(columns=c))


@st.composite
def lookup_requests(draw: st.DrawFn) -> pb.LookupRequest:
    """Keys as rows, as columns or (refused) both; answers asked in rows or in columns."""
    form = draw(st.sampled_from(["rows", "columns", "both"]))
    request = pb.LookupRequest(
        view=draw(st.one_of(st.sampled_from(VIEWS), st.text(max_size=20))),
        keys=draw(st.lists(rows, max_size=4)) if form != "columns" else [],
        columnar=draw(st.booleans()),
    )
    if form != "rows":
        request.key_columns.CopyFrom(draw(columns))
    min_epoch = draw(st.one_of(st.none(), st.integers(0, 2**64 - 1)))
    if min_epoch is not None:
        request.min_epoch = min_epoch
    return request


describe_requests = st.builds(
    pb.DescribeRequest, view=st.one_of(st.sampled_from(VIEWS), st.text(max_size=40))
)


# Evictions change no answer (the last test's seeded lookup checks that too).
evict_requests = st.builds(
    pb.EvictRequest,
    view=st.one_of(st.sampled_from(VIEWS), st.text(max_size=40)),
    keys=st.lists(rows, max_size=3),
)


def load_requests(readable: bool) -> st.SearchStrategy[pb.LoadRequest]:
    """Loads of paths that do not exist or cannot be read (refused before any Spark job), and
    with `readable`, of files that exist but do not fit the source (read by Spark)."""
    paths = ["", "/nonexistent/votes.csv", "relative.csv", "nosuchfs://x/y", "/dev/null/votes.csv"]
    if readable:
        paths += ["/etc/hostname", "/etc/passwd", "/proc/self/status"]
    return st.builds(
        pb.LoadRequest,
        source=st.one_of(st.sampled_from(SOURCES), st.text(max_size=20)),
        path=st.one_of(st.sampled_from(paths), st.text(max_size=40)),
        format=st.one_of(st.sampled_from(["", "csv", "parquet", "jsonl", "xml"]), st.text(max_size=8)),
        options=st.dictionaries(
            st.one_of(st.sampled_from(["header", "delimiter", "quote", "escape"]), st.text(max_size=10)),
            st.text(max_size=5),
            max_size=3,
        ),
    )


TOKENS = [
    "source",
    "view",
    "transient",
    "@next",
    ":-",
    ":=",
    "count",
    "sum",
    "min",
    "max",
    "!",
    "(",
    ")",
    ",",
    ".",
    ":",
    "int",
    "string",
    "float",
    "bool",
    "bytes",
    "cid",
    "X",
    "Y",
    "a",
    "b",
    "vote",
    "article",
    "==",
    "<",
    '"s"',
    "1",
    "-9223372036854775809",
    "1e400",
    "nan",
    "%",
    "\n",
]


@st.composite
def programs(draw: st.DrawFn, base: str) -> str:
    """Text, token soup, or `base` with a few characters changed."""
    kind = draw(st.sampled_from(["text", "tokens", "mutation"]))
    if kind == "text":
        return draw(st.text(max_size=200))
    if kind == "tokens":
        return " ".join(draw(st.lists(st.sampled_from(TOKENS), max_size=60)))
    text = base
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(max_size=3)) + text[i + draw(st.integers(0, 3)) :]
    return text


def report() -> str:
    lines = [", ".join(f"{m} {n}" for m, n in sorted(CASES.items())) + f"; total {sum(CASES.values())}"]
    for method in sorted(CASES):
        codes = ", ".join(f"{c} {n}" for (m, c), n in sorted(CODES.items()) if m == method)
        seconds, what = SLOWEST.get(method, (0.0, ""))
        lines.append(f"  {method}: {codes}; slowest {seconds:.2f}s: {what}")
    return "\n".join(lines)
