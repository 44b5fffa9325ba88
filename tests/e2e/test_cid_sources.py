"""Sources with cid attributes through the real server: install, writes (rows and columns),
deltas at present keys, the Parquet store (flush, keyed upquery by a cid), the write-ahead
log after a SIGKILL, and lookups keyed by a cid, all against a plain-Python model.

The blocks' ids are real CIDs (planner/cid.py); a derived `C := link(...)` CID is checked
too, since a cid read from a source must hash as the same text a program would bind.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

import pytest

from pomoview.client import Cid, Client, InvalidArgument
from pomoview.planner.frontend.cid import cid

from .server_process import ServerProcess, wait_for_flush

PROGRAM = """
source block(id: cid, size: int).
source link(parent: cid, child: cid, label: string).

view children(parent).
view blockLinks(id).
view linkIds(parent).

children(parent: P, child: C, label: L, size: S) :-
    link(parent: P, child: C, label: L), block(id: C, size: S).
blockLinks(id: B, size: S, links: N) :- block(id: B, size: S), N := count : link(parent: B).
linkIds(parent: P, child: C, label: L, cid: I) :- I := link(parent: P, child: C, label: L).
"""

BLOCKS = [Cid(cid("blob", [("n", i)])) for i in range(30)]


class Model:
    """The three views from scratch over the acknowledged writes."""

    def __init__(self) -> None:
        self.blocks: set[tuple[str, int]] = set()
        self.links: set[tuple[str, str, str]] = set()

    def apply(self, source: str, insert: Iterable[dict], delete: Iterable[dict]) -> None:
        rel: set = self.blocks if source == "block" else self.links
        attrs = ("id", "size") if source == "block" else ("parent", "child", "label")
        rel |= {tuple(r[a] for a in attrs) for r in insert}
        rel -= {tuple(r[a] for a in attrs) for r in delete}

    def children(self, p: str) -> list[dict]:
        return _sorted(
            {"parent": p, "child": c, "label": lab, "size": s}
            for pp, c, lab in self.links
            if pp == p
            for b, s in self.blocks
            if b == c
        )

    def block_links(self, b: str) -> list[dict]:
        n = sum(1 for p, _, _ in self.links if p == b)
        return _sorted({"id": b, "size": s, "links": n} for bb, s in self.blocks if bb == b)

    def link_ids(self, p: str) -> list[dict]:
        return _sorted(
            {"parent": p, "child": c, "label": lab,
             "cid": cid("link", [("parent", p), ("child", c), ("label", lab)])}
            for pp, c, lab in self.links
            if pp == p
        )


def _sorted(rows: Iterable[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: sorted(r.items()))


def _check(db: Client, model: Model, epoch: int) -> None:
    keys = list(BLOCKS)
    for view, key, expect in (
        ("children", "parent", model.children),
        ("blockLinks", "id", model.block_links),
        ("linkIds", "parent", model.link_ids),
    ):
        got = db.lookup_many(view, [{key: k} for k in keys], min_epoch=epoch)
        for k in keys:
            rows = _sorted(got[(k,)])
            assert rows == expect(k), f"{view} at {k}"
            for row in rows:  # a cid comes back as a Cid, a string as a plain str
                assert all(type(row[a]) is Cid for a in row if a in ("parent", "child", "id", "cid"))
                assert "label" not in row or type(row["label"]) is str


def _writes(db: Client, model: Model, rng: random.Random, n: int) -> int:
    """`n` random batches of link inserts and deletes and block resizes; the last epoch."""
    epoch = 0
    for _ in range(n):
        ins = [
            {"parent": rng.choice(BLOCKS), "child": rng.choice(BLOCKS), "label": f"l{rng.randrange(3)}"}
            for _ in range(8)
        ]
        ins = [r for r in ins if (r["parent"], r["child"], r["label"]) not in model.links]
        dels = [
            {"parent": Cid(p), "child": Cid(c), "label": lab}
            for p, c, lab in rng.sample(sorted(model.links), min(3, len(model.links)))
        ]
        dels = [d for d in dels if d not in ins]
        epoch = db.write("link", insert=ins, delete=dels)
        model.apply("link", ins, dels)
        b, s = rng.choice(sorted(model.blocks))
        new = {"id": Cid(b), "size": s + 1}
        epoch = db.write("block", insert=[new], delete=[{"id": Cid(b), "size": s}])
        model.apply("block", [new], [{"id": b, "size": s}])
    return epoch


def test_cid_sources_end_to_end(tmp_path: Path) -> None:
    program = tmp_path / "cids.pomo"
    program.write_text(PROGRAM)
    data = tmp_path / "data"
    rng = random.Random(5)
    model = Model()
    server = ServerProcess(data, program=program, flush_interval=0.5).start()
    try:
        with server.client() as db:
            blocks = [{"id": b, "size": rng.randrange(100)} for b in BLOCKS]
            db.write("block", insert=blocks)  # homogeneous rows: sent as columns
            model.apply("block", blocks, [])
            epoch = _writes(db, model, rng, 6)
            wait_for_flush(db, epoch)  # these are in Parquet: the upqueries read them there
            epoch = _writes(db, model, rng, 4)  # these only in the log, overlaid on the snapshot
            _check(db, model, epoch)
            epoch = _writes(db, model, rng, 4)  # deltas at present keys
            _check(db, model, epoch)
            # A plain string is taken for a cid where it is CID text, as a program's literal is.
            assert _sorted(db.lookup("children", {"parent": str(BLOCKS[0])})) == model.children(BLOCKS[0])
            with pytest.raises(InvalidArgument, match=r"inserts\[0\]: attribute 'child'.*not a CID"):
                db.write("link", insert=[{"parent": BLOCKS[0], "child": Cid("bnotacid"), "label": "x"}])
            with pytest.raises(InvalidArgument, match=r"attribute 'id'.*not a CID"):
                db.write("block", insert=[{"id": "hello", "size": 1}])
    finally:
        server.kill()  # the last batches are only in the write-ahead log
    restarted = ServerProcess(data, flush_interval=0.5).start()
    try:
        with restarted.client() as db:
            assert db.stats()["durable_epoch"] == epoch
            _check(db, model, epoch)
            epoch = _writes(db, model, rng, 3)
            _check(db, model, epoch)
    finally:
        restarted.stop()
