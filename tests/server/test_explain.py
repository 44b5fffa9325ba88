"""`pomoview explain`'s rendering (server/explain.py), from real Describe answers.

The nodes come from the in-process engine's dataflow (the graph the server builds, made
by the same planner), sent through the server's `node_message` and the client's
`describe_result`, so the dicts are exactly what `Client.describe(view)` returns. The
DOT is checked by Graphviz itself: drawn as SVG, whose nodes, edges and label lines must
be the Describe nodes'. The text tree is parsed back into edges the same way.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pomoview.client import messages
from pomoview.engine.engine import Engine
from pomoview.proto.pomoview.v1 import view_service_pb2 as pb
from pomoview.server.api.service import node_message
from pomoview.server.cli import explain
from pomoview.server.cli.values import UsageError

REPO = Path(__file__).resolve().parents[2]
NO_DOT = "Graphviz's dot is not installed (apt-get install graphviz); the DOT is not parsed"

REACH = """
source edge(src: int, dst: int).
view reach(src).
reach(src: X, dst: Y) :- edge(src: X, dst: Y).
reach(src: X, dst: Z) :- reach(src: X, dst: Y), edge(src: Y, dst: Z).
"""


def described(engine: Engine, view: str) -> dict[str, object]:
    """What Client.describe(view) returns for the engine's graph."""
    nodes = [node_message(n) for n in engine.graph.graph.node_infos(view)]
    return messages.describe_result(pb.DescribeResponse(program=engine.program.text, nodes=nodes))


def votes() -> tuple[Engine, list[dict[str, object]]]:
    engine = Engine((REPO / "examples" / "votes.pomo").read_text())
    engine.write(insert={"article": [{"id": i, "title": f"t{i}"} for i in range(6)]})
    engine.write(insert={"vote": [{"article_id": i % 3, "user_id": u} for i in range(6) for u in range(i)]})
    for article in (0, 2, 5, 9):  # 9 has no article: present, with no rows
        engine.lookup("articleWithVotes", {"id": article})
    nodes = described(engine, "articleWithVotes")["nodes"]
    assert isinstance(nodes, list)
    return engine, nodes


def reach() -> list[dict[str, object]]:
    engine = Engine(REACH)
    engine.write(insert={"edge": [{"src": 1, "dst": 2}, {"src": 2, "dst": 3}, {"src": 3, "dst": 1}]})
    engine.lookup("reach", {"src": 1})
    nodes = described(engine, "reach")["nodes"]
    assert isinstance(nodes, list)
    return nodes


def edges_of(nodes: list[dict[str, object]]) -> set[tuple[str, str]]:
    return {(str(i), str(n["id"])) for n in nodes for i in n["inputs"]}  # type: ignore[attr-defined]


def svg_graph(dot: str) -> tuple[dict[str, list[str]], set[tuple[str, str]], list[str]]:
    """Draws `dot` with Graphviz: each node's label lines by its name, the edges, and the
    graph's own label lines."""
    program = shutil.which("dot")
    if program is None:
        pytest.skip(NO_DOT)
    svg = subprocess.run([program, "-Tsvg"], input=dot, text=True, capture_output=True, check=True).stdout
    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.fromstring(svg)
    nodes: dict[str, list[str]] = {}
    edges: set[tuple[str, str]] = set()
    graph_label: list[str] = []
    for group in root.iter("{http://www.w3.org/2000/svg}g"):
        name = group.findtext("s:title", default="", namespaces=ns)
        texts = [t.text or "" for t in group.findall("s:text", ns)]
        if group.get("class") == "node":
            nodes[name] = texts
        elif group.get("class") == "edge":
            tail, head = name.split("->")
            edges.add((tail, head))
        elif group.get("class") == "graph":
            graph_label = texts
    return nodes, edges, graph_label


SUMMARY = re.compile(
    r"^(?P<view>.+): (?P<ops>\d+) operators, (?P<state>\d+) with state "
    r"\((?P<partial>\d+) partial, (?P<full>\d+) full(?:, (?P<unmeasured>\d+) not measured)?\)$"
)


def summary_counts(line: str) -> tuple[str, int, int, int, int, int]:
    """A picture's summary line, parsed: the view, then (operators, with state, partial, full,
    not measured)."""
    match = SUMMARY.match(line)
    assert match, line
    numbers = (int(match[k] or 0) for k in ("ops", "state", "partial", "full", "unmeasured"))
    return (match["view"], *numbers)


def counts(view: str, nodes: list[dict[str, object]]) -> tuple[str, int, int, int, int, int]:
    """What the summary must say, counted from the Describe nodes."""
    stateful = [n for n in nodes if n["stateful"]]
    measured = [n for n in stateful if not n["unmeasured"]]
    partial = sum(bool(n["partial"]) for n in measured)
    return (view, len(nodes), len(stateful), partial, len(measured) - partial, len(stateful) - len(measured))


def expected_state(node: dict[str, object]) -> str:
    """The state line the picture must show, from the Describe fields."""
    return f"{node['present_keys']} keys, {node['rows']} rows, ~{node['bytes']} B"


@pytest.mark.parametrize("program", ["votes", "reach"])
def test_the_dot_draws_every_describe_node_and_edge_with_its_state(program: str) -> None:
    nodes = votes()[1] if program == "votes" else reach()
    view = "articleWithVotes" if program == "votes" else "reach"
    drawn, edges, graph_label = svg_graph(explain.to_dot(view, nodes))
    assert set(drawn) == {n["id"] for n in nodes}
    assert edges == edges_of(nodes)
    assert summary_counts(graph_label[0]) == counts(view, nodes)
    for node in nodes:
        lines = drawn[str(node["id"])]
        assert lines[0] == f"{node['id']} {node['detail']}"  # the detail starts with the kind
        if not node["stateful"]:
            assert lines == lines[:1]
        elif node["unmeasured"]:  # reach's recursive Child
            assert node["operator"] == "Child" and lines[1] == "state in a nested circuit (not measured)"
        else:
            key = ", ".join(node["key"]) or "()"  # type: ignore[arg-type]
            assert lines[1] == f"{'partial' if node['partial'] else 'full'} by {key}"
            assert lines[2] == expected_state(node)
    if program == "votes":
        # Four keys looked up, three of them articles: the reader holds exactly those.
        [reader] = [n for n in nodes if n["operator"] == "Reader"]
        assert (reader["present_keys"], reader["rows"]) == (4, 3)
        assert all(n["partial"] for n in nodes if n["stateful"])
    else:
        # The recursion's Child is measured (its totals and traces), partial: demand-driven.
        [child] = [n for n in nodes if n["operator"] == "Child"]
        assert not child["unmeasured"] and child["rows"] > 0 and child["partial"], child


def test_labels_with_quotes_backslashes_and_newlines_are_drawn_as_they_are() -> None:
    _, nodes = votes()
    nasty = 'Filter(title == "a \\"b\\"", path \\N \\\\ {x} <y> & z)\nsecond line'
    nodes[0] = {**nodes[0], "detail": str(nodes[0]["operator"]) + nasty}
    view = 'we"ird\\view'
    drawn, edges, graph_label = svg_graph(explain.to_dot(view, nodes))
    first, second = f"{nodes[0]['id']} {nodes[0]['detail']}".split("\n")
    assert drawn[str(nodes[0]["id"])][:2] == [first, second]
    assert graph_label[0].startswith(view + ":")
    assert edges == edges_of(nodes)


TREE_LINE = re.compile(r"^(?P<lead>[ │├└─]*)(?P<id>n\d+) (?P<rest>.*)$")


@pytest.mark.parametrize("program", ["votes", "reach"])
def test_the_text_tree_has_every_node_once_below_its_readers(program: str) -> None:
    nodes = votes()[1] if program == "votes" else reach()
    view = "articleWithVotes" if program == "votes" else "reach"
    text = explain.to_text(view, nodes).splitlines()
    assert summary_counts(text[0]) == counts(view, nodes)
    by_id = {str(n["id"]): n for n in nodes}
    path: list[str] = []  # the ids from the reader down to the current line's parent
    edges: set[tuple[str, str]] = set()
    shown: list[str] = []
    for line in text[1:]:
        match = TREE_LINE.match(line)
        assert match, line
        depth, node_id, rest = len(match["lead"]) // 3, match["id"], match["rest"]
        del path[depth:]
        if path:
            edges.add((node_id, path[-1]))
        path.append(node_id)
        if rest == "(see above)":
            assert node_id in shown
            continue
        shown.append(node_id)
        node = by_id[node_id]
        assert rest.startswith(str(node["detail"]))
        if node["stateful"] and not node["unmeasured"]:
            assert expected_state(node) in rest and ("partial" if node["partial"] else "full") in rest
    assert sorted(shown) == sorted(by_id)  # each node drawn once
    assert edges == edges_of(nodes)


def test_without_graphviz_an_svg_request_writes_the_dot_and_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    err = io.StringIO()
    written = explain.write_picture("digraph x {}\n", tmp_path / "v.svg", err)
    assert written == tmp_path / "v.dot" and written.read_text() == "digraph x {}\n"
    assert "apt-get install graphviz" in err.getvalue() and str(written) in err.getvalue()
    assert not (tmp_path / "v.svg").exists()
    with pytest.raises(UsageError, match=r"\.dot or \.svg"):
        explain.write_picture("digraph x {}\n", tmp_path / "v.png", err)


def test_a_view_not_looked_up_yet_says_how_to_build_its_dataflow() -> None:
    engine = Engine((REPO / "examples" / "votes.pomo").read_text())
    answer = described(engine, "articleWithVotes")
    answer["relations"] = [{"name": "articleWithVotes", "key": ["id"]}]
    out, err = io.StringIO(), io.StringIO()
    status = explain.explain("articleWithVotes", answer, output=None, text=True, out=out, err=err)
    assert status == 1 and out.getvalue() == ""
    assert "no dataflow yet" in err.getvalue()
    assert "pomoview lookup articleWithVotes id=VALUE" in err.getvalue()
