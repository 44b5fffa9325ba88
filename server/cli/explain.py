"""`pomoview explain VIEW`: a view's dataflow, from `Describe`, as DOT, SVG or a text tree.

Everything here renders the `nodes` of `Client.describe(view)` (one dict per operator,
inputs first) and needs only the standard library: SVG comes from Graphviz's `dot`
program when it is on PATH, and without it the DOT is written instead, with a note saying
how to install it. The command's wiring is `cmd_explain` in cli.py.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from pomoview.server.cli.values import UsageError

Node = Mapping[str, object]

INSTALL_HINT = "install Graphviz for SVG: apt-get install graphviz"
# Fill colours: partial state, full state, state the fields do not measure, no state.
COLOURS = {"partial": "#cfe6ff", "full": "#ffe9a8", "unmeasured": "#e4e4e4", "none": "white"}


def _strs(value: object) -> list[str]:
    assert isinstance(value, list)
    return [str(v) for v in value]


def title(node: Node) -> str:
    """`n4 AggregateJoin(count, partial by ('Id',), groups partial)`: the id and the
    operator's description, which starts with its kind (else the kind is put first)."""
    operator, detail = str(node["operator"]), str(node["detail"])
    if not detail.startswith(operator):
        detail = f"{operator} {detail}".rstrip()
    return f"{node['id']} {detail}"


def mode(node: Node) -> str:
    """One of the COLOURS keys."""
    if not node["stateful"]:
        return "none"
    if node["unmeasured"]:
        return "unmeasured"
    return "partial" if node["partial"] else "full"


def state_lines(node: Node) -> list[str]:
    """What the node's state holds, as short lines; none for a stateless node."""
    kind = mode(node)
    if kind == "none":
        return []
    if kind == "unmeasured":
        return ["state in a nested circuit (not measured)"]
    key = ", ".join(_strs(node["key"])) or "()"
    lines = [f"{kind} by {key}", f"{node['present_keys']} keys, {node['rows']} rows, ~{node['bytes']} B"]
    counters = {"upqueries": node["upqueries"], "dropped": node["dropped"], "evicted": node["evictions"]}
    shown = [f"{count} {what}" for what, count in counters.items() if count]
    if shown:
        lines.append(", ".join(shown))
    return lines


def summary(view: str, nodes: Sequence[Node]) -> str:
    """`articleWithVotes: 8 operators, 5 with state (5 partial, 0 full)`."""
    kinds = [mode(n) for n in nodes]
    line = (
        f"{view}: {len(nodes)} operators, {len(nodes) - kinds.count('none')} with state "
        f"({kinds.count('partial')} partial, {kinds.count('full')} full"
    )
    if kinds.count("unmeasured"):
        line += f", {kinds.count('unmeasured')} not measured"
    return line + ")"


def _sinks(nodes: Sequence[Node]) -> list[Node]:
    """The nodes no other node reads: the view's readers."""
    read = {i for n in nodes for i in _strs(n["inputs"])}
    return [n for n in nodes if n["id"] not in read]


# ---------------------------------------------------------------- text


def to_text(view: str, nodes: Sequence[Node]) -> str:
    """The graph as a tree from each reader up to the sources, a node's inputs indented
    below it; a node read by two others is drawn once and then named `(see above)`."""
    by_id = {str(n["id"]): n for n in nodes}
    lines = [summary(view, nodes)]
    drawn: set[str] = set()

    def draw(node: Node, lead: str, branch: str, below: str) -> None:
        node_id = str(node["id"])
        if node_id in drawn:
            lines.append(f"{lead}{branch}{node_id} (see above)")
            return
        drawn.add(node_id)
        state = state_lines(node)
        lines.append(f"{lead}{branch}{title(node)}" + (f"  [{'; '.join(state)}]" if state else ""))
        inputs = [by_id[i] for i in _strs(node["inputs"]) if i in by_id]
        for k, parent in enumerate(inputs):
            last = k == len(inputs) - 1
            draw(parent, below, "└─ " if last else "├─ ", below + ("   " if last else "│  "))

    for sink in _sinks(nodes):
        draw(sink, "", "", "")
    return "\n".join(lines)


# ---------------------------------------------------------------- DOT


def dot_string(text: str) -> str:
    """A DOT quoted string showing `text` as is: backslashes and quotes escaped (so no
    `\\N`-style label escape applies), line breaks as DOT's centred `\\n`."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def label_lines(node: Node) -> list[str]:
    """A node's label: its title, then its state."""
    return [title(node), *state_lines(node)]


def to_dot(view: str, nodes: Sequence[Node]) -> str:
    """A DOT digraph: one box per operator, coloured by its state (see the graph's label),
    and an edge from each input to its reader, sources at the top."""
    grey = ", grey: state not measured" if any(mode(n) == "unmeasured" for n in nodes) else ""
    legend = f"{summary(view, nodes)}\nblue: partial state, yellow: full state{grey}, white: no state"
    out = [
        f"digraph {dot_string(view)} {{",
        f'  graph [rankdir=TB, labelloc=t, fontname="Helvetica", label={dot_string(legend)}];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [color="#555555"];',
    ]
    for node in nodes:
        shape = ", shape=cylinder" if node["operator"] == "SourceIndex" else ""
        shape = ", peripheries=2" if node["operator"] == "Reader" else shape
        out.append(
            f"  {dot_string(str(node['id']))} [label={dot_string(chr(10).join(label_lines(node)))}, "
            f'fillcolor="{COLOURS[mode(node)]}"{shape}];'
        )
    for node in nodes:
        for parent in _strs(node["inputs"]):
            out.append(f"  {dot_string(parent)} -> {dot_string(str(node['id']))};")
    out.append("}")
    return "\n".join(out) + "\n"


def dot_program() -> str | None:
    """Graphviz's `dot` on PATH, or None."""
    return shutil.which("dot")


def render_svg(dot: str, path: Path) -> None:
    """Writes `dot` drawn as SVG to `path` with Graphviz (which must be installed)."""
    program = dot_program()
    assert program is not None
    done = subprocess.run(
        [program, "-Tsvg", "-o", str(path)], input=dot, text=True, capture_output=True, timeout=120
    )
    if done.returncode != 0:
        raise UsageError(f"Graphviz could not draw {path}: {done.stderr.strip()}")


def write_picture(dot: str, path: Path, err: TextIO) -> Path:
    """Writes the graph to `path`: DOT for `.dot`, SVG for `.svg` when Graphviz is
    installed, else the DOT beside it (`.dot`) with a note on `err`. Returns what it wrote."""
    suffix = path.suffix.lower()
    if suffix not in (".dot", ".svg"):
        raise UsageError(f"--output {path}: expected a .dot or .svg file, or - for DOT on stdout")
    if suffix == ".svg":
        if dot_program() is not None:
            render_svg(dot, path)
            return path
        path = path.with_suffix(".dot")
        print(f"Graphviz's dot is not on PATH, so no SVG: writing DOT to {path} ({INSTALL_HINT})", file=err)
    path.write_text(dot, encoding="utf-8")
    return path


def default_output(view: str) -> Path:
    """VIEW.svg in the current folder, or VIEW.dot without Graphviz (write_picture notes it)."""
    return Path(f"{view}.svg")


def explain(
    view: str, described: Mapping[str, object], *, output: str | None, text: bool, out: TextIO, err: TextIO
) -> int:
    """Runs `pomoview explain` on `described` (Client.describe(view)); returns the exit status."""
    nodes = described["nodes"]
    assert isinstance(nodes, list)
    if not nodes:
        keys = next(
            (_strs(r["key"]) for r in described["relations"] if r["name"] == view),  # type: ignore[attr-defined, index]
            [],
        )
        example = " ".join(f"{k}=VALUE" for k in keys) or "KEY=VALUE"
        print(
            f"error: {view} has no dataflow yet: the server builds a view's operators at its first "
            f"lookup (e.g. pomoview lookup {view} {example}), then explain can draw them",
            file=err,
        )
        return 1
    if text:
        print(to_text(view, nodes), file=out)
        return 0
    dot = to_dot(view, nodes)
    if output == "-":
        out.write(dot)
        return 0
    written = write_picture(dot, Path(output) if output else default_output(view), err)
    print(f"wrote {written} ({summary(view, nodes)})", file=out)
    return 0
