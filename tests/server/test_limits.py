"""The input limits (server/limits.py) and Install's checks (server/program_limits.py), in
process: parsing the flags, the messages, and the plan depth estimate. (The stack a deep
plan's upquery takes: tests/planner/test_deep_plans.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pomoview.planner.compile import compile_program
from pomoview.planner.frontend.size import plan_depth
from pomoview.server.errors import ResourceExhausted
from pomoview.server.limits import programs as program_limits
from pomoview.server.limits.requests import LIMITS, LimitConfigError, Limits

sys.path.insert(0, str(Path(__file__).parents[1] / "planner"))
from program_shapes import chain, wide  # noqa: E402

VOTES = """source article(id: int, title: string).
source vote(article_id: int, user_id: int).
view articleWithVotes(id).
articleWithVotes(id: Id, title: Title, votes: N) :-
    article(id: Id, title: Title),
    N := count : vote(article_id: Id).
"""


def test_plan_depth_follows_the_deepest_chain() -> None:
    depth = plan_depth(compile_program(chain(10)).checked)
    assert depth is not None
    # r0 is one literal plus its distinct: 2; each ri adds two literals and a distinct.
    assert (depth.depth, depth.relation) == (2 + 3 * 10, "r10")
    assert depth.chain == tuple(f"r{i}" for i in range(10, -1, -1))
    depth = plan_depth(compile_program(wide(7)).checked)
    assert depth is not None and depth.depth == 8


def test_each_install_limit_is_refused_with_its_flag_and_position() -> None:
    limits = Limits(max_program_bytes=2000, max_rules=9, max_rule_atoms=4, max_plan_depth=20)

    def refused(text: str) -> str:
        with pytest.raises(ResourceExhausted) as err:
            program_limits.check_text(limits, text)
            compile_program(
                text,
                "p.pomo",
                check_parsed=lambda p: program_limits.check_parsed(limits, p, text, "p.pomo"),
                check_checked=lambda c: program_limits.check_checked(limits, c, "p.pomo"),
            )
        return err.value.message

    message = refused("% \u00e9\n" * 500)  # 500 * 5 bytes: counted in UTF-8
    assert "the program's size in bytes is 2,500, more than the limit of 2,000" in message
    assert "(--max-program-bytes, env POMOVIEW_MAX_PROGRAM_BYTES)" in message
    assert "the number of rules is 10" in refused("source a(x: int).\n" + "a(x: 1).\n" * 10)
    message = refused(wide(5))
    assert message.startswith("p.pomo:3:1: error: the number of literals in this rule's body (for 'w')")
    assert "is 5, more than the limit of 4 (--max-rule-atoms" in message
    message = refused(chain(8))
    assert message.startswith(
        "p.pomo:11:1: error: the estimated dataflow depth of 'r8' (r8 <- r7 <- r6 <- ..."
    )
    assert "is 26, more than the limit of 20 (--max-plan-depth" in message
    # At the limits, the program is accepted.
    compile_program(chain(5), check_checked=lambda c: program_limits.check_checked(limits, c, "p"))


def test_limits_resolve_from_flags_and_environment() -> None:
    assert Limits.resolve({}) == Limits()
    config = {
        "max_lookup_keys": ("10", "flag"),
        "max_program_bytes": ("2MiB", "env POMOVIEW_MAX_PROGRAM_BYTES"),
    }
    limits = Limits.resolve(config)
    assert (limits.max_lookup_keys, limits.max_program_bytes) == (10, 2 << 20)
    assert Limits().describe()["max_message_bytes"] == "64M"
    with pytest.raises(LimitConfigError, match="^--max-write-rows: a limit must be positive, got '0'"):
        Limits.resolve({"max_write_rows": ("0", "flag")})
    with pytest.raises(LimitConfigError, match="^env POMOVIEW_MAX_RULES: expected a whole number, got '1M'"):
        Limits.resolve({"max_rules": ("1M", "env POMOVIEW_MAX_RULES")})
    for limit in LIMITS:  # every row has its field, and the flag and variable follow the name
        assert hasattr(Limits(), limit.name)
        assert limit.flag == "--" + limit.name.replace("_", "-")
