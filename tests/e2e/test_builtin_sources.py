"""The server's own state as relations, end to end: a subscription to a view over
`pomoview_state` sees a state appear when a lookup fills it (the introspection thread
refreshes the built-in sources at least once a second), the answers match Stats, and a
write to a built-in source is refused with INVALID_ARGUMENT naming it, changing nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pomoview.client import InvalidArgument

from .server_process import ServerProcess

PROGRAM = """
source vote(article: int, user: int).
view voters(article).
voters(article: A, user: U) :- vote(article: A, user: U).

% The states holding more than 3 rows, by view.
view bigStates(view).
bigStates(view: V, node: N, rows: R) :- pomoview_state(view: V, node: N, rows: R), R > 3.
"""


def test_a_subscription_sees_a_state_grow_past_the_bound(tmp_path: Path) -> None:
    program = tmp_path / "p.pomo"
    program.write_text(PROGRAM)
    server = ServerProcess(tmp_path / "data", program=program).start()
    try:
        with server.client() as db:
            epoch = db.write("vote", insert=[{"article": 1, "user": u} for u in range(10)])
            subscription = db.subscribe("bigStates", [{"view": "voters"}])
            snapshot = next(subscription)
            assert snapshot.snapshot and snapshot.inserts == []  # no state of voters yet
            seen = threading.Event()
            got: list[object] = []

            def read() -> None:
                for change in subscription:
                    got.append(change)
                    if change.inserts:
                        seen.set()
                        return

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            rows = db.lookup("voters", {"article": 1}, min_epoch=epoch)  # fills 10 rows
            assert len(rows) == 10
            assert seen.wait(30), f"no change reached the subscription: {got}"
            change = got[-1]
            stats = {
                (s["id"], s["rows"]) for s in db.stats()["states"] if "voters" in s["views"] and s["stateful"]
            }
            assert {(r["node"], r["rows"]) for r in change.inserts} == {n for n in stats if n[1] > 3}  # type: ignore[attr-defined]
            subscription.close()
            with pytest.raises(InvalidArgument, match="'pomoview_state' is a built-in source.*read-only"):
                db.write("pomoview_state", insert=[{"node": "n0"}])
            assert db.stats()["applied_epoch"] == epoch
    finally:
        server.stop()
