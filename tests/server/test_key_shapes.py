"""A lookup's keys through the shortcut for plain shapes (api/requests.py `KeyShapes`) equal
the general path's (`lookup_keys` then `typed_keys`), and the shortcut takes nothing the
general path refuses: random key columns against random relations, the general path as
the oracle."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pomoview.planner.frontend.errors import Position
from pomoview.planner.frontend.relations import Relation
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.api.requests import KeyShapes, lookup_keys
from pomoview.server.errors import ServiceError
from pomoview.server.typed_rows import TypedKeys, typed_keys

INT64 = st.integers(-(2**63), 2**63 - 1)
# A Column's value cases and what each holds.
CASES: dict[str, st.SearchStrategy[Any]] = {
    "int_values": INT64,
    "float_values": st.floats(allow_nan=True),
    "string_values": st.text(max_size=3),
    "bool_values": st.booleans(),
    "bytes_values": st.binary(max_size=3),
    "cid_values": st.sampled_from(["", "x", "bafkqaaa", "zQ3sh"]),
}
ATTRIBUTES = ["a", "b", "c", "d"]
TYPES = ["int", "float", "string", "bool", "bytes", "cid", "any"]  # "any": left untyped


def relation(types: dict[str, str]) -> Relation:
    return Relation("v", list(types), dict(types), "derived", Position(1, 1))


@st.composite
def relations(draw: st.DrawFn) -> Relation:
    names = draw(st.lists(st.sampled_from(ATTRIBUTES), min_size=1, max_size=4, unique=True))
    return relation({a: draw(st.sampled_from(TYPES)) for a in names})


@st.composite
def requests(draw: st.DrawFn) -> pb.LookupRequest:
    request = pb.LookupRequest(view="v", columnar=True)
    count = draw(st.integers(0, 3))
    for _ in range(draw(st.integers(0, 3))):
        column = request.key_columns.columns.add(name=draw(st.sampled_from([*ATTRIBUTES, "zz"])))
        case = draw(st.sampled_from([*CASES, None]))
        if case is not None:
            n = draw(st.sampled_from([count, count, count, count + 1]))  # mostly of one length
            getattr(column, case).values.extend(draw(st.lists(CASES[case], min_size=n, max_size=n)))
    if draw(st.booleans()):
        request.key_columns.SetInParent()  # present, maybe with no column
    return request


def typed(values: list[tuple[Any, ...]]) -> list[tuple[tuple[type, Any], ...]]:
    """The tuples with each value's type beside it (True == 1, but not as a key's value)."""
    return [tuple((type(v), v) for v in t) for t in values]


def general(relation: Relation, request: pb.LookupRequest) -> tuple[tuple[str, ...], list[Any]] | str:
    try:
        return typed_keys(relation, "v", lookup_keys(request))
    except ServiceError as err:
        return f"refused: {err}"


@settings(max_examples=400, deadline=None)
@given(relations(), requests())
def test_the_shortcut_gives_the_general_paths_keys_or_leaves_them_to_it(
    rel: Relation, request: pb.LookupRequest
) -> None:
    shapes = KeyShapes()
    want = general(rel, request)
    for _ in range(2):  # the second time from the memo
        got = shapes.typed(request, rel)
        if got is None:
            continue
        assert not isinstance(want, str), f"the shortcut took keys the general path refuses ({want})"
        assert got.relation is rel
        assert (got.attrs, typed(got.tuples)) == (want[0], typed(want[1]))
        assert len(got) == len(want[1]) > 0


def test_plain_shapes_take_the_shortcut() -> None:
    """One int key column, as `Client.lookup` sends it, and two columns sent out of the
    view's order: both become tuples in the view's order without the general path."""
    rel = relation({"id": "int", "name": "string", "score": "float"})
    shapes = KeyShapes()
    request = pb.LookupRequest(view="v", columnar=True)
    request.key_columns.columns.add(name="id").int_values.values.extend([7, 8])
    got = shapes.typed(request, rel)
    assert got is not None and (got.attrs, got.tuples) == (("id",), [(7,), (8,)])
    two = pb.LookupRequest(view="v", columnar=True)
    two.key_columns.columns.add(name="name").string_values.values.extend(["x"])
    two.key_columns.columns.add(name="id").int_values.values.extend([3])
    got = shapes.typed(two, rel)
    assert got is not None and (got.attrs, got.tuples) == (("id", "name"), [(3, "x")])
    floats = pb.LookupRequest(view="v", columnar=True)
    floats.key_columns.columns.add(name="score").float_values.values.extend([1.5])
    assert shapes.typed(floats, rel) is None  # a float may be NaN: the general path checks it


def test_keys_checked_against_one_relation_are_checked_again_against_another() -> None:
    """A program installed between the check and the read: `typed_keys` checks the keys as
    they arrived against the new relation, and refuses what no longer fits."""
    old, new = relation({"id": "int"}), relation({"id": "string"})
    request = pb.LookupRequest(view="v", columnar=True)
    request.key_columns.columns.add(name="id").int_values.values.extend([7])
    keys = KeyShapes().typed(request, old)
    assert isinstance(keys, TypedKeys)
    assert typed_keys(old, "v", keys) == (("id",), [(7,)])
    try:
        typed_keys(new, "v", keys)
    except ServiceError as err:
        assert "id" in str(err)
    else:
        raise AssertionError("keys of the old relation's type passed against the new one")
