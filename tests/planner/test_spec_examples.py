"""Every example of pomo_logic.txt, run through the Engine, derives exactly what it lists.

The §1.1 notation examples (xCoordinate, zeroPoint and its @next rule) are
here too. Where the spec lists no data or no result (most examples besides
diagonal and suggestedMeal) we choose the data and compute the expected tuples
in plain Python next to the test. Where the spec's own text is inconsistent,
the test says how we read it:

- suggestedMeal writes its body variables in lower case (`personA`) but its
  head in upper case (`PersonA`). Our grammar reads any identifier in a term
  position as a variable (except true/false), case-sensitively, so `personA`
  and `PersonA` are two variables and the spec's text is refused (its head is
  not range restricted). We read the example as one variable per person. The
  rule also lacks its final period, and the expected output has a typo'd quote
  (`"Brooke, person2: "Quinn"`), read as `"Brooke", person2: "Quinn"`.
- popularProfile writes `c := count : ...` with a lower-case variable, which
  our grammar accepts as it is; it uses `:−` (U+2212), which parses too.
- totalStock §2.5.3 is missing the colon in its last (invalid) example; that
  one and the one that aggregates a bound variable are refused.
- The checkbox example has no initial state: we read it as an event, a
  transient source `created(id, state)` with a deductive rule
  `checkbox(id: Id, state: S) :- created(id: Id, state: S).` A persistent
  source or a fact would keep re-deriving the initial state at every epoch, next
  to the flipped one, which is not what a checkbox does.
- categoryCount: `category()` has no attributes in the spec; we give category a
  `name` and product a `category` attribute of type cid, whose values are the
  categories' CIDs.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys

import pytest

from pomoview.engine.engine import Engine
from pomoview.planner.frontend.cid import cid, encode_tuple
from pomoview.planner.frontend.errors import ProgramError


def rows(relation: str, attrs: tuple[str, ...], tuples: list[tuple]) -> dict[str, list[dict[str, object]]]:
    return {relation: [dict(zip(attrs, t, strict=True)) for t in tuples]}


# -- §1.1 notation: xCoordinate, zeroPoint, and zeroPoint@next -------------------

POINTS = [(0, 0), (0, 3), (2, 0), (1, 1), (4, 5)]


def point_rows(points: list[tuple[int, int]]) -> dict[str, list[dict[str, object]]]:
    return rows("point", ("x", "y"), points)


@pytest.mark.parametrize(
    "rule",
    [
        "xCoordinate(x: X) :− point(x: X, y: Y).",
        "xCoordinate(x: X) :− point(x: X).",  # unused attributes may be left out
    ],
)
def test_x_coordinate(rule: str) -> None:
    engine = Engine("source point(x: int, y: int).\n" + rule)
    engine.write(point_rows(POINTS))
    assert engine.read("xCoordinate") == {(x,) for x, _ in POINTS}


ZERO_POINT = """
source point(x: int, y: int).
zeroPoint(x: 0, y: Y) :− point(x: 0, y: Y).
zeroPoint(x: X, y: 0) :− point(x: X, y: 0).
"""


def test_zero_point_two_rules_one_head() -> None:
    engine = Engine(ZERO_POINT)
    engine.write(point_rows(POINTS))
    assert engine.read("zeroPoint") == {(0, 0), (0, 3), (2, 0)}


def test_zero_point_next_keeps_tuples_forever() -> None:
    """`zeroPoint(...)@next :- zeroPoint(...)`: a derived tuple is carried to every later epoch,
    even after the point that derived it is deleted."""
    engine = Engine(ZERO_POINT + "zeroPoint(x: X, y: Y)@next :- zeroPoint(x: X, y: Y).\n")
    engine.write(point_rows(POINTS))
    assert engine.read("zeroPoint") == {(0, 0), (0, 3), (2, 0)}
    engine.write(delete=point_rows([(0, 3)]))
    assert engine.read("zeroPoint") == {(0, 0), (0, 3), (2, 0)}
    engine.write(point_rows([(0, 9)]), point_rows([(2, 0)]))
    assert engine.read("zeroPoint") == {(0, 0), (0, 3), (2, 0), (0, 9)}
    engine.write()
    assert engine.read("zeroPoint") == {(0, 0), (0, 3), (2, 0), (0, 9)}


# -- §2.5.4 constraints: diagonal ------------------------------------------------

DIAGONAL = """
source point(x: int, y: int).
diagonal(x: X, y: Y) :- point(x: X, y: Y), X <= Y.
"""


def test_diagonal() -> None:
    engine = Engine(DIAGONAL)
    points = [(x, y) for x in range(3) for y in range(3)]
    engine.write(rows("point", ("x", "y"), points))
    assert engine.read("diagonal") == {(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)}
    assert engine.lookup("diagonal", {"x": 1}) == {(1, 1), (1, 2)}
    engine.write(delete=rows("point", ("x", "y"), [(0, 2)]))
    assert engine.read("diagonal") == {(0, 0), (0, 1), (1, 1), (1, 2), (2, 2)}
    assert engine.lookup("diagonal", {"x": 0}) == {(0, 0), (0, 1)}


# -- §2.5.2 negation: suggestedMeal ---------------------------------------------

MEAL_DECLS = """
source person(name: string).
source likes(name: string, food: string).
source dislikes(name: string, food: string).
"""

MEAL_SPEC_TEXT = """suggestedMeal(person1: PersonA, person2: PersonB, meal: Food) :-
  person(name: personA),
  person(name: personB),
  personA != personB,
  likes(name: personA, food: Food),
  !dislikes(name: personB, food: Food)
"""

MEAL = """
suggestedMeal(person1: PersonA, person2: PersonB, meal: Food) :-
  person(name: PersonA),
  person(name: PersonB),
  PersonA != PersonB,
  likes(name: PersonA, food: Food),
  !dislikes(name: PersonB, food: Food).
"""

MEAL_EDB = {
    "person": [{"name": "Quinn"}, {"name": "Brooke"}],
    "likes": [
        {"name": "Quinn", "food": "Ramen"},
        {"name": "Brooke", "food": "Vegan"},
        {"name": "Brooke", "food": "Schnitzel"},
    ],
    "dislikes": [
        {"name": "Quinn", "food": "Vegan"},
        {"name": "Brooke", "food": "Mushrooms"},
    ],
}


def test_suggested_meal_spec_text_is_refused_as_written() -> None:
    """Verbatim (plus the missing period) the head's PersonA is not the body's personA."""
    with pytest.raises(ProgramError) as err:
        Engine(MEAL_DECLS + MEAL_SPEC_TEXT + ".")
    assert "PersonA is not range restricted" in str(err.value)


def test_suggested_meal() -> None:
    engine = Engine(MEAL_DECLS + MEAL)
    engine.write(MEAL_EDB)
    assert engine.read("suggestedMeal") == {
        ("Quinn", "Brooke", "Ramen"),
        ("Brooke", "Quinn", "Schnitzel"),
    }
    # the negation across epochs: Quinn comes to dislike Schnitzel, Brooke stops disliking nothing
    engine.write({"dislikes": [{"name": "Quinn", "food": "Schnitzel"}]})
    assert engine.read("suggestedMeal") == {("Quinn", "Brooke", "Ramen")}
    engine.write(delete={"dislikes": [{"name": "Quinn", "food": "Vegan"}]})
    assert engine.read("suggestedMeal") == {("Quinn", "Brooke", "Ramen"), ("Brooke", "Quinn", "Vegan")}
    assert engine.lookup("suggestedMeal", {"person1": "Brooke"}) == {("Brooke", "Quinn", "Vegan")}


# -- §2.5.3 aggregation: totalStock ----------------------------------------------

PRODUCT = "source product(name: string, category: string, quantity: int).\n"
TOTAL_GLOBAL = """
totalStock(total: Total) :- Total := sum Quantity : product(category: Category, quantity: Quantity).
"""
TOTAL_PER_CATEGORY = """
totalStock(category: Category, total: Total) :-
  product(category: Category),
  Total := sum Quantity : product(category: Category, quantity: Quantity).
"""
TOTAL_INVALID = """
totalStock(total: Total) :-
  product(name: Name, category: Category, quantity: Quantity),
  Total := sum Quantity : product(quantity: Quantity).
"""
TOTAL_NO_COLON = """
totalStock(category: Category, total: Total) :-
  Total := sum Quantity product(category: Category, quantity: Quantity).
"""

# Two products with the same category and quantity: the sum is over the distinct
# tuples of product that match the atom, so both count (clingo's reading too).
STOCK = [("apple", "fruit", 5), ("pear", "fruit", 5), ("kale", "veg", 2), ("leek", "veg", 7)]


def stock_by_category(stock: list[tuple[str, str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, category, quantity in stock:
        out[category] = out.get(category, 0) + quantity
    return out


def test_total_stock_global() -> None:
    engine = Engine(PRODUCT + TOTAL_GLOBAL)
    assert engine.read("totalStock") == {(0,)}  # the sum of an empty group is 0
    engine.write(rows("product", ("name", "category", "quantity"), STOCK))
    assert engine.read("totalStock") == {(sum(q for *_, q in STOCK),)}
    engine.write(delete=rows("product", ("name", "category", "quantity"), STOCK[:1]))
    assert engine.read("totalStock") == {(sum(q for *_, q in STOCK[1:]),)}


def test_total_stock_per_category() -> None:
    engine = Engine(PRODUCT + TOTAL_PER_CATEGORY)
    engine.write(rows("product", ("name", "category", "quantity"), STOCK))
    assert engine.read("totalStock") == set(stock_by_category(STOCK).items())
    assert engine.lookup("totalStock", {"category": "veg"}) == {("veg", 9)}
    remaining = STOCK[1:3]
    engine.write(delete=rows("product", ("name", "category", "quantity"), [STOCK[0], STOCK[3]]))
    assert engine.read("totalStock") == set(stock_by_category(remaining).items())
    assert engine.lookup("totalStock", {"category": "veg"}) == {("veg", 2)}


@pytest.mark.parametrize("text", [TOTAL_INVALID, TOTAL_NO_COLON], ids=["bound-aggregated", "no-colon"])
def test_total_stock_invalid_forms_are_refused(text: str) -> None:
    with pytest.raises(ProgramError):
        Engine(PRODUCT + text)


# -- §1.1 predicates: popularProfile ---------------------------------------------

PROFILE = """
source profile(id: int).
source follower(id: int, follows: int).
popularProfile(id: X) :−
    profile(id: X),
    c := count : follower(follows: X),
    c >= THRESHOLD.
"""


def popular(profiles: set[int], followers: set[tuple[int, int]], threshold: int) -> set[tuple[int]]:
    return {(p,) for p in profiles if sum(1 for _, f in followers if f == p) >= threshold}


def test_popular_profile_at_the_spec_threshold() -> None:
    engine = Engine(PROFILE.replace("THRESHOLD", "1000"))
    engine.write(rows("profile", ("id",), [(1,), (2,)]))
    fans = [(i, 1) for i in range(999)] + [(i, 2) for i in range(10)]
    engine.write(rows("follower", ("id", "follows"), fans))
    assert engine.read("popularProfile") == set()
    engine.write(rows("follower", ("id", "follows"), [(5000, 1)]))  # the 1000th follower
    assert engine.read("popularProfile") == {(1,)}
    assert engine.lookup("popularProfile", {"id": 1}) == {(1,)}
    engine.write(delete=rows("follower", ("id", "follows"), [(0, 1)]))
    assert engine.read("popularProfile") == set()
    assert engine.lookup("popularProfile", {"id": 1}) == set()


@pytest.mark.parametrize("threshold", [0, 1, 2])
def test_popular_profile_small_thresholds(threshold: int) -> None:
    """With threshold 0 a profile nobody follows is popular: its count is 0, not absent."""
    engine = Engine(PROFILE.replace("THRESHOLD", str(threshold)))
    profiles = {1, 2, 3}
    history = [
        {(10, 1), (11, 1), (12, 2)},
        {(10, 1), (12, 2), (13, 2), (14, 4)},
        {(14, 4), (15, 3)},
        set(),
    ]
    engine.write(rows("profile", ("id",), [(p,) for p in profiles]))
    current: set[tuple[int, int]] = set()
    for followers in history:
        engine.write(
            rows("follower", ("id", "follows"), sorted(followers - current)),
            rows("follower", ("id", "follows"), sorted(current - followers)),
        )
        current = followers
        assert engine.read("popularProfile") == popular(profiles, current, threshold)
        for p in profiles:
            assert engine.lookup("popularProfile", {"id": p}) == popular({p}, current, threshold)


# -- §2.1 time: the checkbox -----------------------------------------------------

CHECKBOX = """
transient source clicks(id: int).
transient source created(id: int, state: bool).
checkbox(id: Id, state: S) :- created(id: Id, state: S).
checkbox(id: Id, state: S)@next     :- checkbox(id: Id, state: S), !clicks(id: Id).
checkbox(id: Id, state: true)@next  :- checkbox(id: Id, state: false), clicks(id: Id).
checkbox(id: Id, state: false)@next :- checkbox(id: Id, state: true), clicks(id: Id).
"""


def test_checkbox_over_epochs_of_clicks() -> None:
    """checkbox at epoch t is its state after the clicks of the epochs before t.

    The reference is a plain Python state machine: a click at epoch t flips the
    state seen at t+1; a box exists from the epoch that creates it."""
    engine = Engine(CHECKBOX)
    assert engine.read("checkbox") == set()
    epochs: list[tuple[list[tuple[int, bool]], list[int]]] = [
        ([(1, False), (2, True)], []),  # created
        ([], [1]),
        ([], []),
        ([], [1, 2]),
        ([(3, False)], [2]),  # a box created while others are clicked
        ([], [3, 7]),  # a click on a box that does not exist does nothing
        ([], []),
        ([], [1]),
        ([], [1]),
    ]
    state: dict[int, bool] = {}
    pending: list[int] = []  # the clicks of the previous epoch
    for epoch, (created, clicks) in enumerate(epochs, start=1):
        for box in pending:
            if box in state:
                state[box] = not state[box]
        for box, initial in created:
            state[box] = initial
        pending = clicks
        got = engine.write(
            {"created": [{"id": b, "state": s} for b, s in created], "clicks": [{"id": c} for c in clicks]}
        )
        assert got == epoch == engine.epoch
        assert engine.read("checkbox") == set(state.items()), f"epoch {epoch}"
        assert engine.read("clicks") == {(c,) for c in clicks}  # transient: this epoch's only
        for box in (1, 2, 3):
            want = {(box, state[box])} if box in state else set()
            assert engine.lookup("checkbox", {"id": box}) == want, f"epoch {epoch} box {box}"


def test_checkbox_empty_epochs_still_advance_time() -> None:
    engine = Engine(CHECKBOX)
    engine.write({"created": [{"id": 1, "state": False}], "clicks": [{"id": 1}]})
    assert engine.read("checkbox") == {(1, False)}
    assert engine.write() == 2
    assert engine.read("checkbox") == {(1, True)}
    assert engine.write() == 3
    assert engine.read("checkbox") == {(1, True)}


# -- §2.2 content addressing: categoryCount --------------------------------------

CATEGORY = """
source category(name: string).
source product(name: string, category: cid).
categoryCount(category: Category, count: Count) :-
    Category := category(),
    Count := count : product(category: Category).
"""


def category_cid(name: str) -> str:
    return cid("category", [("name", name)])


def test_category_count() -> None:
    engine = Engine(CATEGORY)
    fruit, veg, empty = category_cid("fruit"), category_cid("veg"), category_cid("empty")
    engine.write({"category": [{"name": "fruit"}, {"name": "veg"}, {"name": "empty"}]})
    assert engine.read("categoryCount") == {(fruit, 0), (veg, 0), (empty, 0)}
    engine.write(
        {
            "product": [
                {"name": "apple", "category": fruit},
                {"name": "pear", "category": fruit},
                {"name": "kale", "category": veg},
                {"name": "ghost", "category": category_cid("gone")},  # a dangling foreign key
            ]
        }
    )
    assert engine.read("categoryCount") == {(fruit, 2), (veg, 1), (empty, 0)}
    assert engine.lookup("categoryCount", {"category": fruit}) == {(fruit, 2)}
    engine.write({"category": [{"name": "gone"}]}, {"category": [{"name": "veg"}]})
    gone = category_cid("gone")
    assert engine.read("categoryCount") == {(fruit, 2), (empty, 0), (gone, 1)}
    assert engine.lookup("categoryCount", {"category": veg}) == set()
    assert engine.lookup("categoryCount", {"category": gone}) == {(gone, 1)}


def test_cid_format() -> None:
    """CIDv1, raw codec, sha2-256, base32 lower with the multibase prefix 'b'."""
    text = category_cid("fruit")
    assert text.startswith("b") and text == text.lower()
    raw = base64.b32decode(text[1:].upper() + "=" * (-len(text[1:]) % 8))
    assert raw[:4] == bytes([0x01, 0x55, 0x12, 0x20])
    assert raw[4:] == hashlib.sha256(encode_tuple("category", [("name", "fruit")])).digest()


def test_cids_are_deterministic_and_typed() -> None:
    pairs = [("b", 1), ("a", "x")]
    assert cid("r", pairs) == cid("r", list(reversed(pairs)))  # attribute order does not matter
    # values of different types differ, though Python calls them equal
    variants = {cid("r", [("a", v)]) for v in (1, 1.0, True, "1", b"1")}
    assert len(variants) == 5
    assert cid("r", [("a", 1)]) != cid("s", [("a", 1)])
    # the same on another run, whatever its hash seed
    code = "from pomoview.planner.frontend.cid import cid; print(cid('r', [('b', 1), ('a', 'x')]))"
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
    )
    assert other.stdout.strip() == cid("r", pairs)
    # pinned: a change of the encoding changes every stored CID, so it must be deliberate
    assert cid("category", [("name", "fruit")]) == PINNED_FRUIT


PINNED_FRUIT = "bafkreid62m2zqu7mpvabhb6ahgg7c7r5jay2aykj667jghacslqsh7y3py"
