"""The vote example end to end: real server process, real Spark, real gRPC, a Python oracle."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pomoview.client import Client
from pomoview.server.cli.commands import main

from .server_process import ServerProcess, wait_for_flush
from .votes_model import VotesModel


def _rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["title"])


def _check(client: Client, model: VotesModel, ids: list[int], epoch: int) -> None:
    for article_id in ids:
        got = client.lookup("articleWithVotes", {"id": article_id}, min_epoch=epoch)
        assert _rows(got) == model.view(article_id), f"article {article_id} at epoch {epoch}"


def test_vote_lookups_match_python_over_writes_and_deletes(votes_server: ServerProcess) -> None:
    rng = random.Random(20261121)
    model = VotesModel()
    n_articles = 40
    with votes_server.client() as db:
        articles = [{"id": i, "title": f"article {i}"} for i in range(n_articles)]
        epoch = db.write("article", insert=articles)
        model.apply("article", articles, [])
        # Cold lookups of a few keys before any vote: they upquery and stay present.
        early = [0, 1, 2, 3, 39]
        _check(db, model, early, epoch)
        written = 0
        while written < 3000:
            batch = []
            for _ in range(50):
                row = {"article_id": rng.randrange(n_articles), "user_id": rng.randrange(300)}
                batch.append(row)
            deletes = []
            if model.votes and rng.random() < 0.5:
                for a, u in rng.sample(sorted(model.votes), k=min(10, len(model.votes))):
                    deletes.append({"article_id": a, "user_id": u})
            # A batch may not insert and delete one tuple; keep the inserts that do not collide.
            gone = {(d["article_id"], d["user_id"]) for d in deletes}
            batch = [r for r in batch if (r["article_id"], r["user_id"]) not in gone]
            epoch = db.write("vote", insert=batch, delete=deletes)
            model.apply("vote", batch, deletes)
            written += len(batch)
            if rng.random() < 0.2:
                _check(db, model, rng.sample(range(n_articles), 3), epoch)
        # Retitle an article and delete another one, in one atomic batch.
        epoch = db.write_batch(
            {
                "article": (
                    [{"id": 5, "title": "renamed"}],
                    [{"id": 5, "title": "article 5"}, {"id": 6, "title": "article 6"}],
                )
            }
        )
        model.apply(
            "article",
            [{"id": 5, "title": "renamed"}],
            [{"id": 5, "title": "article 5"}, {"id": 6, "title": "article 6"}],
        )
        _check(db, model, list(range(n_articles)) + [n_articles + 1], epoch)
        stats = db.stats()
        assert stats["dropped_deltas"] > 0, "writes for keys nobody looked up were dropped"
        assert stats["upqueries"] > 0


def test_cold_keys_after_flush_read_parquet_plus_log(votes_server: ServerProcess) -> None:
    """A key first looked up after a flush reads the Parquet snapshot and the logged writes after it."""
    with votes_server.client() as db:
        base = 1000
        epoch = db.write("article", insert=[{"id": base + i, "title": f"t{i}"} for i in range(5)])
        db.write(
            "vote",
            insert=[{"article_id": base + i, "user_id": u} for i in range(5) for u in range(i)],
        )
        wait_for_flush(db, epoch + 1)
        epoch = db.write(
            "vote",
            insert=[{"article_id": base + 4, "user_id": 99}],
            delete=[{"article_id": base + 3, "user_id": 0}],
        )
        expected = {0: 0, 1: 1, 2: 2, 3: 2, 4: 5}
        for i, votes in expected.items():
            rows = db.lookup("articleWithVotes", {"id": base + i}, min_epoch=epoch)
            assert rows == [{"id": base + i, "title": f"t{i}", "votes": votes}]


def _votes_for(written: list[dict], article: int) -> int:
    """The oracle: how many distinct votes for `article` the test wrote."""
    return len({v["user_id"] for v in written if v["article_id"] == article})


def test_min_epoch_reads_your_writes(votes_server: ServerProcess) -> None:
    with votes_server.client() as db:
        article = 2000
        written: list[dict] = []
        epoch = db.write("article", insert=[{"id": article, "title": "ryw"}])
        # The first lookup makes the key present; at the article's epoch it must see it, no votes.
        rows = db.lookup("articleWithVotes", {"id": article}, min_epoch=epoch)
        assert rows == [{"id": article, "title": "ryw", "votes": _votes_for(written, article)}]
        for user in range(20):
            vote = {"article_id": article, "user_id": user}
            epoch = db.write("vote", insert=[vote])
            written.append(vote)
            rows = db.lookup("articleWithVotes", {"id": article}, min_epoch=epoch)
            assert rows == [{"id": article, "title": "ryw", "votes": _votes_for(written, article)}]


def test_describe_and_stats_show_the_partial_states_of_a_view(votes_server: ServerProcess) -> None:
    """Through the real server: after a lookup, Describe(view) draws the view's dataflow and
    Stats lists its states, every one partial, holding the looked-up key."""
    from pomoview.client.errors import NotFound

    with votes_server.client() as db:
        votes = [{"article_id": 901, "user_id": 1}]
        db.write("article", insert=[{"id": 901, "title": "described"}])
        epoch = db.write("vote", insert=votes)  # the lookup waits for this one: exactly one vote
        assert db.lookup("articleWithVotes", {"id": 901}, min_epoch=epoch) == [
            {"id": 901, "title": "described", "votes": _votes_for(votes, 901)}
        ]
        nodes = db.describe("articleWithVotes")["nodes"]
        assert isinstance(nodes, list)
        kinds = [n["operator"] for n in nodes]
        assert "AggregateJoin" in kinds and kinds[-1] == "Reader"
        before: set[str] = set()
        for n in nodes:  # inputs first, a closed graph
            assert set(n["inputs"]) <= before, n
            before.add(n["id"])
        states = [n for n in db.stats()["states"] if n["stateful"]]  # type: ignore[union-attr]
        assert states and all(n["partial"] and n["present_keys"] >= 1 for n in states)
        assert db.describe()["nodes"] == []
        try:
            db.describe("nope")
        except NotFound as err:
            assert "nope" in str(err)
        else:
            raise AssertionError("an unknown view is NOT_FOUND")


def _cli(capsys: pytest.CaptureFixture[str], server: ServerProcess, *args: str) -> tuple[int, str, str]:
    """Runs `pomoview ARGS` in this process (a new one costs seconds on a loaded machine):
    its exit status, stdout and stderr."""
    capsys.readouterr()
    status = main([*args, "--address", server.address])
    out, err = capsys.readouterr()
    return status, out, err


def _held(nodes: object) -> dict[str, tuple[int, int]]:
    """Each state's (present keys, rows), by its operator's description."""
    assert isinstance(nodes, list)
    return {n["detail"]: (n["present_keys"], n["rows"]) for n in nodes if n["stateful"]}


def test_explain_draws_the_states_of_the_keys_looked_up(
    votes_server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI: `explain` shows what Describe and Stats say, and the lookups of
    this test add exactly their keys, and the rows under them, to each state."""
    view = "articleWithVotes"
    articles = {5000: 3, 5003: 1, 5004: 0, 5005: 2}  # id -> its votes; ids no other test uses
    looked_up = [5000, 5003, 5004, 5999]  # 5999 is no article: present, with no row
    with votes_server.client() as db:
        before = _held(db.describe(view)["nodes"])  # what the module's other tests left
        db.write("article", insert=[{"id": a, "title": f"explained {a}"} for a in articles])
        epoch = db.write(
            "vote", insert=[{"article_id": a, "user_id": u} for a, n in articles.items() for u in range(n)]
        )
        # In one call: one round of Spark jobs for the four keys.
        got = db.lookup_many(view, [{"id": a} for a in looked_up], min_epoch=epoch)
        assert {key: list(rows) for key, rows in got.items()} == {
            (a,): [{"id": a, "title": f"explained {a}", "votes": articles[a]}] if a in articles else []
            for a in looked_up
        }
        # Once as the installed command would run, in a process of its own.
        command = [sys.executable, "-m", "pomoview.server.cli", "explain", view, "--text"]
        text = subprocess.run(
            [*command, "--address", votes_server.address], capture_output=True, text=True, timeout=120
        )
        dot = _cli(capsys, votes_server, "explain", view, "-o", "-")
        svg = _cli(capsys, votes_server, "explain", view, "-o", str(tmp_path / "v.svg"))
        nodes = db.describe(view)["nodes"]
        states = db.stats()["states"]
    assert isinstance(nodes, list) and states == nodes  # one view, nothing moved in between
    assert (text.returncode, dot[0], svg[0]) == (0, 0, 0), text.stderr + dot[2] + svg[2]
    # The states against the keys looked up: each gained those 4 keys, and the rows under them.
    added = {
        detail: (keys - before.get(detail, (0, 0))[0], rows - before.get(detail, (0, 0))[1])
        for detail, (keys, rows) in _held(nodes).items()
    }
    found = sum(a in articles for a in looked_up)
    assert added["SourceIndex(article by ('id',), partial)"] == (len(looked_up), found)
    assert added["SourceIndex(vote by ('article_id',), partial)"] == (
        len(looked_up),
        sum(articles.get(a, 0) for a in looked_up),
    )
    assert added["Reader('id', 'title', 'votes') by ('id',), partial"] == (len(looked_up), found)
    assert all(n["partial"] for n in nodes if n["stateful"])
    # The CLI's pictures, parsed back, against facts known without the renderer: this
    # program's shape, and the Describe answer's nodes, edges and counts.
    edges = {(str(i), str(n["id"])) for n in nodes for i in n["inputs"]}
    _check_votes_view_shape(nodes, edges)
    counts = _counts(nodes)
    labels, dot_edges, legend, styles = _parse_dot(dot[1])
    assert set(labels) == {n["id"] for n in nodes} and dot_edges == edges
    assert _summary(legend[0]) == (view, *counts)
    assert "white: no state" in legend[1]
    for node in nodes:
        _check_label(labels[node["id"]], node)
        # Boxes: sources are cylinders, the reader has a double border, the rest plain.
        kind = {"SourceIndex": "shape=cylinder", "Reader": "peripheries=2"}.get(node["operator"], "")
        assert styles[node["id"]][1] == kind, (node["id"], styles[node["id"]])
    # Filled by mode, as the legend says: every state here is partial, one colour; no state white.
    fills: dict[bool, set[str]] = {True: set(), False: set()}
    for node in nodes:
        fills[node["stateful"]].add(styles[node["id"]][0])
    assert fills[False] == {"white"} and len(fills[True]) == 1 and fills[True] != {"white"}, fills
    summary, tree_edges, shown, roots, leaves = _parse_tree(text.stdout, nodes)
    assert _summary(summary) == (view, *counts)
    assert sorted(shown) == sorted(n["id"] for n in nodes)  # each node drawn once
    assert tree_edges == edges
    by_id = {n["id"]: n for n in nodes}
    assert [by_id[r]["operator"] for r in roots] == ["Reader"]  # the tree hangs from the reader
    assert sorted(by_id[leaf]["detail"] for leaf in leaves) == [
        "SourceIndex(article by ('id',), partial)",
        "SourceIndex(vote by ('article_id',), partial)",
    ]
    if shutil.which("dot") is None:
        assert "apt-get install graphviz" in svg[2] and (tmp_path / "v.dot").read_text() == dot[1]
        return
    ns = {"s": "http://www.w3.org/2000/svg"}
    groups = list(ET.parse(tmp_path / "v.svg").getroot().iter("{http://www.w3.org/2000/svg}g"))
    drawn = {
        g.findtext("s:title", namespaces=ns): [t.text or "" for t in g.findall("s:text", ns)]
        for g in groups
        if g.get("class") == "node"
    }
    assert set(drawn) == {n["id"] for n in nodes}
    for node in nodes:
        _check_label(drawn[node["id"]], node)
    titles = [str(g.findtext("s:title", namespaces=ns)) for g in groups if g.get("class") == "edge"]
    svg_edges = {tuple(t.split("->")) for t in titles}
    assert svg_edges == edges


def _counts(nodes: list[dict]) -> tuple[int, int, int, int, int]:
    """(operators, with state, partial, full, not measured), counted from Describe's nodes."""
    stateful = [n for n in nodes if n["stateful"]]
    measured = [n for n in stateful if not n["unmeasured"]]
    return (
        len(nodes),
        len(stateful),
        sum(n["partial"] for n in measured),
        sum(not n["partial"] for n in measured),
        len(stateful) - len(measured),
    )


SUMMARY = re.compile(
    r"^(?P<view>\S+): (?P<ops>\d+) operators, (?P<state>\d+) with state "
    r"\((?P<partial>\d+) partial, (?P<full>\d+) full(?:, (?P<unmeasured>\d+) not measured)?\)$"
)


def _summary(line: str) -> tuple[str, int, int, int, int, int]:
    """A picture's summary line, parsed: the view and the counts of `_counts`."""
    match = SUMMARY.match(line)
    assert match, line
    numbers = (int(match[k] or 0) for k in ("ops", "state", "partial", "full", "unmeasured"))
    return (match["view"], *numbers)


def _check_votes_view_shape(nodes: list[dict], edges: set[tuple[str, str]]) -> None:
    """What articleWithVotes's dataflow must be, from examples/votes.pomo alone: one reader
    keyed by id, read by nobody; the sources article (by id) and vote (by article_id), partial;
    a count that every path from the reader to either source goes through; every state partial."""
    by_id = {n["id"]: n for n in nodes}
    sinks = [n for n in nodes if not any(i == n["id"] for i, _ in edges)]
    assert [(n["operator"], n["key"]) for n in sinks] == [("Reader", ["id"])]
    sources = sorted((n["operator"], n["key"], n["detail"]) for n in nodes if not n["inputs"])
    assert sources == [
        ("SourceIndex", ["article_id"], "SourceIndex(vote by ('article_id',), partial)"),
        ("SourceIndex", ["id"], "SourceIndex(article by ('id',), partial)"),
    ]
    [count] = [n for n in nodes if n["operator"] == "AggregateJoin"]
    assert str(count["detail"]).startswith("AggregateJoin(count")
    parents = {n["id"]: set(n["inputs"]) for n in nodes}

    def reaches(start: str, goal: str, avoid: str | None = None) -> bool:
        todo, seen = [start], set()
        while todo:
            at = todo.pop()
            if at == goal:
                return True
            if at not in seen and at != avoid:
                seen.add(at)
                todo.extend(parents[at])
        return False

    reader = sinks[0]["id"]
    for _, _, detail in sources:
        [source] = [i for i, n in by_id.items() if n["detail"] == detail]
        assert reaches(reader, source) and not reaches(reader, source, avoid=count["id"])
    assert all(n["partial"] for n in nodes if n["stateful"])


def _check_label(lines: list[str], node: dict) -> None:
    """A drawn node's label: its id and description, then for a state its mode and key, and
    the keys and rows it holds (Describe's fields)."""
    assert lines[0] == f"{node['id']} {node['detail']}", lines
    if node["stateful"]:
        assert lines[1] == f"{'partial' if node['partial'] else 'full'} by {', '.join(node['key'])}", lines
        assert lines[2].startswith(f"{node['present_keys']} keys, {node['rows']} rows, "), lines
    else:
        assert lines == lines[:1], lines


QUOTED = r'"((?:[^"\\]|\\.)*)"'
DOT_NODE = re.compile(rf"^  {QUOTED} \[label={QUOTED}, fillcolor={QUOTED}(?P<shape>.*)\];$")
DOT_EDGE = re.compile(rf"^  {QUOTED} -> {QUOTED};$")
DOT_GRAPH = re.compile(rf"^  graph \[.*label={QUOTED}\];$")


def _unquote(text: str) -> str:
    """A DOT string's text: `\\n` is a line break, any other backslash escapes the next character."""
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], text)


def _parse_dot(
    dot: str,
) -> tuple[dict[str, list[str]], set[tuple[str, str]], list[str], dict[str, tuple[str, str]]]:
    """The DOT digraph's node labels (as lines) by name, its edges, the graph's label lines and
    each node's (fill colour, shape attributes); a line of any other form fails."""
    lines = dot.splitlines()
    assert lines[0].startswith("digraph ") and lines[-1] == "}", dot
    labels: dict[str, list[str]] = {}
    styles: dict[str, tuple[str, str]] = {}
    edges: set[tuple[str, str]] = set()
    legend: list[str] = []
    for line in lines[1:-1]:
        if node := DOT_NODE.match(line):
            name = _unquote(node[1])
            labels[name] = _unquote(node[2]).split("\n")
            styles[name] = (_unquote(node[3]), node["shape"].removeprefix(", "))
        elif edge := DOT_EDGE.match(line):
            edges.add((_unquote(edge[1]), _unquote(edge[2])))
        elif graph := DOT_GRAPH.match(line):
            legend = _unquote(graph[1]).split("\n")
        else:
            assert re.match(r"^  (node|edge) \[", line), line
    return labels, edges, legend, styles


TREE_LINE = re.compile(r"^(?P<lead>[ │├└─]*)(?P<id>n\d+) (?P<rest>.*)$")


def _parse_tree(
    text: str, nodes: list[dict]
) -> tuple[str, set[tuple[str, str]], list[str], list[str], list[str]]:
    """`explain --text`, parsed: its summary line, the edges of the tree (a node's inputs are
    indented below it), the nodes drawn in full, the roots and the nodes drawn with nothing
    below them. Each node's line must carry its description and, for a state, its mode, key,
    keys and rows."""
    by_id = {n["id"]: n for n in nodes}
    lines = text.splitlines()
    path: list[str] = []  # the ids from the root down to the current line's parent
    edges: set[tuple[str, str]] = set()
    shown: list[str] = []
    roots: list[str] = []
    has_children: set[str] = set()
    for line in lines[1:]:
        match = TREE_LINE.match(line)
        assert match, line
        depth, node_id, rest = len(match["lead"]) // 3, match["id"], match["rest"]
        del path[depth:]
        if path:
            edges.add((node_id, path[-1]))
            has_children.add(path[-1])
        else:
            roots.append(node_id)
        path.append(node_id)
        if rest == "(see above)":
            assert node_id in shown, line
            continue
        shown.append(node_id)
        node = by_id[node_id]
        assert rest.startswith(str(node["detail"])), line
        if node["stateful"]:
            mode = "partial" if node["partial"] else "full"
            held = f"[{mode} by {', '.join(node['key'])}; {node['present_keys']} keys, {node['rows']} rows, "
            assert rest[len(str(node["detail"])) :].lstrip().startswith(held), line
        else:
            assert rest == node["detail"], line
    leaves = [i for i in shown if i not in has_children]
    return lines[0], edges, shown, roots, leaves
