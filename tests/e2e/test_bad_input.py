"""Bad input gets the right status, a message naming what and where, and changes nothing.

Hostile input over the wire (issue 13): the limits of `serve`, malformed protobuf and
strings that are not UTF-8, ints past 64 bits, and a hypothesis fuzz of every RPC
(rpc_fuzz.py), all against one server; the last test checks it is still up with its data.
The fuzz's CI run is short; `-m slow` runs the longer sweep.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pomoview.client import Client, InvalidArgument, NotFound
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb

from . import rpc_fuzz as fz
from .server_process import VOTES, ServerProcess

# Every call's deadline: a refusal must come well within it (the machine is shared and slow).
DEADLINE = 30.0
LOAD_DEADLINE = 60.0
# The message limit of this module's server: a 50 MB program is past it.
MESSAGE_LIMIT = 32 << 20


@pytest.fixture(scope="module")
def votes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """conftest's server with votes.pomo, its message limit lowered to 32M; the other limits
    are the defaults. It does not flush: its answers come from the log, so that no test here
    waits for Spark (an Install waits for a running flush, and a flush for the Spark JVM to
    boot, which can take minutes on a loaded machine)."""
    data = Path(tmp_path_factory.mktemp("votes")) / "data"
    server = ServerProcess(
        data, program=VOTES, flush_interval=3600, extra_args=["--max-message-bytes", "32M"]
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def channel(votes_server: ServerProcess) -> Iterator[grpc.Channel]:
    """A raw channel: requests go as bytes, so they may be anything. It may send and receive
    more than grpc's default 4M, to reach the server's own limits."""
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(votes_server.address, options=options) as ch:
        yield ch


@pytest.fixture(scope="module")
def seeded(votes_server: ServerProcess) -> int:
    with votes_server.client() as db:
        db.write("article", insert=[{"id": 77, "title": "seed"}])
        epoch = db.write("vote", insert=[{"article_id": 77, "user_id": 1}])
        assert db.lookup("articleWithVotes", {"id": 77}, min_epoch=epoch)
        return epoch


def _unchanged(db, before_epoch: int) -> None:  # type: ignore[no-untyped-def]
    assert db.stats()["durable_epoch"] == before_epoch
    assert db.lookup("articleWithVotes", {"id": 77}) == [{"id": 77, "title": "seed", "votes": 1}]


def test_syntax_error_names_line_and_column(votes_server: ServerProcess, seeded: int) -> None:
    program = "source a(x: int).\nview b(x).\nb(x: X) :- a(x: X) X > 1.\n"
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument) as err:
            db.install(program, "bad.pomo")
        assert "bad.pomo:3:20:" in str(err.value)
        assert "^" in str(err.value)
        # The installed program is untouched: the vote view still answers.
        _unchanged(db, seeded)


def test_unknown_attribute_in_program_is_positioned(votes_server: ServerProcess, seeded: int) -> None:
    program = "source a(x: int).\nview b(x).\nb(x: X) :- a(y: X).\n"
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument) as err:
            db.install(program, "attr.pomo")
        assert "attr.pomo:3:14:" in str(err.value)
        assert "no attribute 'y'" in str(err.value)
        _unchanged(db, seeded)


@pytest.mark.parametrize(
    ("source", "insert", "delete", "needle"),
    [
        ("nosuch", [{"id": 1}], [], "unknown source 'nosuch'"),
        ("vote", [{"article_id": 1}], [], "missing attribute user_id"),
        ("vote", [{"article_id": 1, "user_id": 2, "extra": 3}], [], "unknown attribute 'extra'"),
        ("vote", [{"article_id": "one", "user_id": 2}], [], "attribute 'article_id': expected int"),
        ("article", [{"id": 1, "title": 5}], [], "attribute 'title': expected string"),
        (
            "vote",
            [{"article_id": 77, "user_id": 3}],
            [{"article_id": 77, "user_id": 3}],
            "both inserts and deletes",
        ),
    ],
)
def test_bad_write_is_refused_and_changes_nothing(
    votes_server: ServerProcess, seeded: int, source: str, insert: list, delete: list, needle: str
) -> None:
    with votes_server.client() as db:
        # A valid change ride along in the same batch must not be applied either.
        good = {"vote": ([{"article_id": 77, "user_id": 42}], [])}
        changes = (
            {**good, source: (insert, delete)}
            if source != "vote"
            else {source: (insert + good["vote"][0], delete)}
        )
        with pytest.raises(InvalidArgument) as err:
            db.write_batch(changes)
        assert needle in str(err.value)
        _unchanged(db, seeded)


def test_unknown_view_is_not_found(votes_server: ServerProcess, seeded: int) -> None:
    with votes_server.client() as db:
        with pytest.raises(NotFound) as err:
            db.lookup("noSuchView", {"id": 1})
        assert "noSuchView" in str(err.value)
        with pytest.raises(InvalidArgument):
            db.lookup("articleWithVotes", {"nope": 1})
        _unchanged(db, seeded)


# ------------------------------------------------------------------ limits


def _refused(channel: grpc.Channel, method: str, request: bytes, code: grpc.StatusCode) -> str:
    outcome = fz.call(channel, method, request, DEADLINE)
    assert outcome.code == code, outcome
    assert outcome.seconds < DEADLINE
    return outcome.details


def _keys(n: int) -> bytes:
    """A LookupRequest of articleWithVotes for n keys (ids 0..999 over and over), encoded
    directly: building a million Row messages would take the client longer than the server."""
    distinct = b"".join(fz.field(2, fz.raw_row((b"id", fz.int_field(1, i)))) for i in range(1000))
    assert n % 1000 == 0
    return fz.field(1, b"articleWithVotes") + distinct * (n // 1000)


def _chain_body(atoms: int) -> str:
    body = ", ".join(f"vote(article_id: A{i}, user_id: A{i + 1})" for i in range(atoms))
    return f"source vote(article_id: int, user_id: int).\nview wide(a).\nwide(a: A0) :-\n{body}.\n"


@pytest.mark.parametrize(
    ("method", "request_bytes", "needles"),
    [
        pytest.param("Lookup", lambda: _keys(1_000_000), ["1,000,000", "--max-lookup-keys"], id="1M-keys"),
        pytest.param(
            "Write",
            lambda: fz.field(
                1,
                fz.field(1, b"vote")
                + fz.field(
                    2, fz.raw_row((b"article_id", fz.int_field(1, 1)), (b"user_id", fz.int_field(1, 1)))
                )
                * 100_001,
            ),
            ["100,001", "--max-write-rows", "POMOVIEW_MAX_WRITE_ROWS"],
            id="100001-rows",
        ),
        pytest.param(
            "Install",
            lambda: pb.InstallRequest(program="% padding\n" * 200_000).SerializeToString(),
            ["2,000,000", "--max-program-bytes"],
            id="2MB-program",
        ),
        pytest.param(
            "Install",
            lambda: pb.InstallRequest(program="x" * 50_000_000).SerializeToString(),
            [str(MESSAGE_LIMIT)],  # grpc's own refusal: "... larger than max (N vs. 33554432)"
            id="50MB-program",
        ),
        pytest.param(
            "Install",
            lambda: pb.InstallRequest(program=_chain_body(5_000), filename="wide.pomo").SerializeToString(),
            ["wide.pomo:3:1:", "5,000", "--max-rule-atoms"],
            id="5000-atom-body",
        ),
        pytest.param(
            "Install",
            lambda: pb.InstallRequest(
                program="source a(x: int).\n" + "a(x: 1).\n" * 10_001
            ).SerializeToString(),
            ["10,001", "--max-rules"],
            id="10001-rules",
            marks=pytest.mark.slow,  # parsing them takes a while; test_limits.py checks the limit
        ),
    ],
)
def test_a_request_past_a_limit_is_refused_naming_it(
    votes_server: ServerProcess,
    seeded: int,
    channel: grpc.Channel,
    method: str,
    request_bytes,
    needles,  # type: ignore[no-untyped-def]
) -> None:
    details = _refused(channel, method, request_bytes(), grpc.StatusCode.RESOURCE_EXHAUSTED)
    for needle in needles:
        assert needle in details, details
    with votes_server.client() as db:
        _unchanged(db, seeded)


@pytest.mark.parametrize(
    "program",
    [
        pytest.param("a(" * 200_000, id="deeply-nested"),
        pytest.param(
            "source a(x: int).\nview b(x).\nb(x: X) :- " + "a(x: X), " * 900 + "X > 1 X.\n", id="wide-bad"
        ),
        pytest.param('source a(x: string).\na(x: "\\' + "\\" * 100_000 + '").\n', id="long-literal"),
    ],
)
def test_a_deep_or_wide_bad_program_is_refused_quickly(
    votes_server: ServerProcess, seeded: int, channel: grpc.Channel, program: str
) -> None:
    details = _refused(
        channel,
        "Install",
        pb.InstallRequest(program=program).SerializeToString(),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "<program>:" in details and "error:" in details, details
    with votes_server.client() as db:
        _unchanged(db, seeded)


@pytest.mark.parametrize("n", [pytest.param(1_000), pytest.param(5_000, marks=pytest.mark.slow)])
def test_a_long_relation_chain_compiles_and_answers(votes_server: ServerProcess, seeded: int, n: int) -> None:
    """Each relation reads the one before it: the dataflow is 2n operators deep, and the
    lookup's upquery walks all of them (with an explicit stack: when it recursed, 3n frames
    went past Python's default limit of 1,000)."""
    chain = ["r0(article_id: A, user_id: U) :- vote(article_id: A, user_id: U)."]
    chain += [
        f"r{i}(article_id: A, user_id: U) :- r{i - 1}(article_id: A, user_id: U)." for i in range(1, n + 1)
    ]
    program = VOTES.read_text() + f"view r{n}(article_id).\n" + "\n".join(chain) + "\n"
    with Client(votes_server.address, timeout=DEADLINE * 4) as db:
        try:
            db.install(program, "chain.pomo")
            assert db.lookup(f"r{n}", {"article_id": 77}) == [{"article_id": 77, "user_id": 1}]
        finally:
            db.install(VOTES.read_text(), VOTES.name)
        _unchanged(db, seeded)


# ------------------------------------------------------------------ what the wire carries

NOT_UTF8 = b"caf\xc3\x28 \xff"
VIEW = fz.field(1, b"articleWithVotes")


def _key(name: bytes, value: bytes) -> bytes:
    return fz.field(2, fz.raw_row((name, value)))


def _article(title: bytes) -> bytes:
    row = fz.raw_row((b"id", fz.int_field(1, 5)), (b"title", title))
    return fz.field(1, fz.field(1, b"article") + fz.field(2, row))


@pytest.mark.parametrize(
    ("method", "request_bytes", "message"),
    [
        ("Install", fz.field(1, b"source a(x: int). " + NOT_UTF8), "InstallRequest"),
        ("Install", fz.field(1, VOTES.read_bytes()) + fz.field(2, NOT_UTF8), "InstallRequest"),
        ("Lookup", fz.field(1, NOT_UTF8), "LookupRequest"),
        ("Lookup", VIEW + _key(NOT_UTF8, fz.int_field(1, 77)), "LookupRequest"),
        ("Write", _article(fz.field(3, NOT_UTF8)), "WriteRequest"),
        ("Write", fz.field(1, fz.field(1, NOT_UTF8)), "WriteRequest"),
        ("Lookup", VIEW + _key(b"id", fz.field(6, NOT_UTF8)), "LookupRequest"),
        ("Describe", fz.field(1, NOT_UTF8), "DescribeRequest"),
        ("Load", fz.field(1, b"vote") + fz.field(2, b"/tmp/" + NOT_UTF8), "LoadRequest"),
        (
            "Load",
            fz.field(1, b"vote") + fz.field(4, fz.field(1, NOT_UTF8) + fz.field(2, b"x")),
            "LoadRequest",
        ),
        ("Stats", b"\x0a\x05ab", "StatsRequest"),  # truncated: 5 bytes announced, 2 sent
        ("Lookup", VIEW + b"\x12\xff\xff\xff\xff\x0f", "LookupRequest"),
        # an 11-byte varint: no int64 (nor any 64-bit varint) is that long
        ("Lookup", VIEW + _key(b"id", b"\x08" + b"\xff" * 10 + b"\x01"), "LookupRequest"),
    ],
)
def test_a_request_that_does_not_parse_is_invalid_argument(
    votes_server: ServerProcess,
    seeded: int,
    channel: grpc.Channel,
    method: str,
    request_bytes: bytes,
    message: str,
) -> None:
    details = _refused(channel, method, request_bytes, grpc.StatusCode.INVALID_ARGUMENT)
    assert f"not a valid pomoview.v1.{message}" in details, details
    with votes_server.client() as db:
        _unchanged(db, seeded)


def test_bytes_that_are_not_utf8_are_a_value_in_a_bytes_field(
    votes_server: ServerProcess, seeded: int
) -> None:
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument) as err:
            db.write("article", insert=[{"id": 5, "title": NOT_UTF8}])
        assert "attribute 'title': expected string, got bytes" in str(err.value)
        _unchanged(db, seeded)


def test_ints_past_64_bits(votes_server: ServerProcess, seeded: int, channel: grpc.Channel) -> None:
    with votes_server.client() as db:
        # The client refuses them before sending: int64 cannot carry them.
        for value in (2**63, -(2**63) - 1, 2**200):
            with pytest.raises(ValueError, match="'user_id': int .* is outside int64"):
                db.write("vote", insert=[{"article_id": 5, "user_id": value}])
            with pytest.raises(ValueError, match="'id': int .* is outside int64"):
                db.lookup("articleWithVotes", {"id": value})
        _unchanged(db, seeded)
    # On the wire, a 10-byte varint holds 70 bits; protobuf keeps the low 64 (two's complement),
    # so the server sees 2**64 + 5 as 5, and 2**63 as -(2**63), as any protobuf reader does.
    for sent in (2**64 + 5, 2**63, 2**70 - 1):
        outcome = fz.call(channel, "Lookup", VIEW + _key(b"id", fz.int_field(1, sent)), DEADLINE)
        assert outcome.code == grpc.StatusCode.OK, outcome
        reply = pb.LookupResponse.FromString(outcome.reply)
        assert len(reply.results) == 1 and not reply.results[0].rows  # no article has that id
    # A misplaced one is named with the value the server saw:
    details = _refused(
        channel, "Write", _article(fz.int_field(1, 2**64 + 5)), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert "attribute 'title': expected string, got int 5" in details, details


def test_duplicate_and_empty_attributes(
    votes_server: ServerProcess, seeded: int, channel: grpc.Channel
) -> None:
    # A map field keeps the last of duplicate keys (protobuf's rule): the key is id=77.
    request = VIEW + fz.field(2, fz.raw_row((b"id", fz.int_field(1, 1)), (b"id", fz.int_field(1, 77))))
    outcome = fz.call(channel, "Lookup", request, DEADLINE)
    assert outcome.code == grpc.StatusCode.OK, outcome
    rows = pb.LookupResponse.FromString(outcome.reply).results[0].rows
    assert [r.fields["votes"].int_value for r in rows] == [1]
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument, match="has no attribute '' "):
            db.lookup("articleWithVotes", {"": 77})
        with pytest.raises(InvalidArgument, match="unknown attribute '' "):
            db.write("vote", insert=[{"article_id": 5, "user_id": 1, "": 2}])
        with pytest.raises(InvalidArgument, match="missing attribute"):
            db.write("vote", insert=[{}])
        _unchanged(db, seeded)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.0, sys.float_info.max])
def test_nan_and_infinities(votes_server: ServerProcess, seeded: int, value: float) -> None:
    with votes_server.client() as db:
        with pytest.raises(InvalidArgument) as err:
            db.write("vote", insert=[{"article_id": value, "user_id": 1}])
        needle = "is NaN, which equals no value" if math.isnan(value) else "expected int, got float"
        assert needle in str(err.value), err.value
        with pytest.raises(InvalidArgument) as err:
            db.lookup("articleWithVotes", {"id": value})
        assert needle in str(err.value), err.value
        _unchanged(db, seeded)


# ------------------------------------------------------------------ the fuzz

# Requests per RPC: its message, or raw bytes (most of which do not parse as it).
STRATEGIES: dict[str, st.SearchStrategy[bytes]] = {
    "Install": fz.programs(VOTES.read_text()).map(lambda t: pb.InstallRequest(program=t).SerializeToString()),
    "Write": fz.write_requests.map(lambda r: r.SerializeToString()),
    "Lookup": fz.lookup_requests().map(lambda r: r.SerializeToString()),
    "Describe": fz.describe_requests.map(lambda r: r.SerializeToString()),
    "Stats": st.just(b""),
    "Evict": fz.evict_requests.map(lambda r: r.SerializeToString()),
    "Load": fz.load_requests(readable=False).map(lambda r: r.SerializeToString()),
}
# The sweep also loads files that exist, which runs Spark jobs.
SWEEP_STRATEGIES = {
    **STRATEGIES,
    "Load": fz.load_requests(readable=True).map(lambda r: r.SerializeToString()),
}
# CI: about 25 s in all on this 2-core machine; `-m slow`: the sweep. Load runs Spark jobs.
CI_EXAMPLES = {"Install": 30, "Write": 30, "Lookup": 60, "Describe": 30, "Stats": 10, "Evict": 20, "Load": 20}
SWEEP_EXAMPLES = {
    "Install": 400, "Write": 600, "Lookup": 400, "Describe": 150, "Stats": 50, "Evict": 150, "Load": 60
}
# Epochs committed by fuzz requests that were valid (a write or load not touching the seeded
# article): the durable epoch must have moved by exactly these, and nothing else.
COMMITTED: list[int] = []


def _fuzz(channel: grpc.Channel, method: str, examples: int, sweep: bool = False) -> None:
    deadline = LOAD_DEADLINE if method == "Load" else DEADLINE
    strategy = st.one_of((SWEEP_STRATEGIES if sweep else STRATEGIES)[method], st.binary(max_size=120))

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(request=strategy)
    def one(request: bytes) -> None:
        outcome = fz.call(channel, method, request, deadline)
        fz.record(method, outcome, request)
        fz.check(outcome, method, deadline)
        if outcome.code != grpc.StatusCode.OK:
            return
        if method == "Write":
            COMMITTED.append(pb.WriteResponse.FromString(outcome.reply).epoch)
        elif method == "Load":
            COMMITTED.append(pb.LoadProgress.FromString(outcome.reply).done.epoch)
        elif method == "Install":  # a valid program replaced votes.pomo: put it back
            restore = pb.InstallRequest(program=VOTES.read_text(), filename=VOTES.name).SerializeToString()
            assert fz.call(channel, "Install", restore, DEADLINE).code == grpc.StatusCode.OK

    one()


@pytest.mark.parametrize("method", list(STRATEGIES))
def test_fuzz_every_rpc(seeded: int, channel: grpc.Channel, method: str) -> None:
    _fuzz(channel, method, CI_EXAMPLES[method])


@pytest.mark.slow
@pytest.mark.parametrize("method", list(STRATEGIES))
def test_fuzz_every_rpc_sweep(seeded: int, channel: grpc.Channel, method: str) -> None:
    _fuzz(channel, method, SWEEP_EXAMPLES[method], sweep=True)


def test_the_server_is_up_and_its_data_unchanged(votes_server: ServerProcess, seeded: int) -> None:
    """Last: after everything above, the process runs, the seeded answer is the same, and the
    durable epoch moved only by the fuzz's valid writes."""
    assert votes_server.process is not None and votes_server.process.poll() is None
    with votes_server.client() as db:
        stats = db.stats()
        # Each valid write or load committed one epoch (an empty one commits none, and
        # answers the current epoch), and nothing else did.
        assert stats["durable_epoch"] == seeded + len({e for e in COMMITTED if e > seeded})
        assert stats["applied_epoch"] == stats["durable_epoch"]
        assert db.lookup("articleWithVotes", {"id": 77}) == [{"id": 77, "title": "seed", "votes": 1}]
        assert {r["name"] for r in db.describe()["relations"]} == {"article", "vote", "articleWithVotes"}  # type: ignore[index]
    print(f"\nfuzz cases run: {fz.report()}", file=sys.stderr)
