"""What Stats and Describe report about the dataflow: one NodeInfo per operator."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NodeInfo:
    """One operator of the dataflow graph and, when it keeps one, its state.

    `key` names the state's key columns; `bytes` is an estimate of the state's memory;
    `dropped` counts deltas dropped at a missing key, `upqueries` the fills it served.
    """

    id: str
    operator: str
    detail: str
    inputs: list[str] = field(default_factory=list)
    stateful: bool = False
    key: list[str] = field(default_factory=list)
    partial: bool = False
    present_keys: int = 0
    rows: int = 0
    bytes: int = 0
    dropped: int = 0
    upqueries: int = 0
    evictions: int = 0
    views: list[str] = field(default_factory=list)


def _states(node: object) -> list[object]:
    """The KeyedStates a node keeps (an interim view; each operator will report its own)."""
    found: list[object] = []
    for name in ("state", "sides", "bodies"):
        value = getattr(node, name, None)
        if value is None:
            continue
        found.extend(value if isinstance(value, tuple) else [value])
    return found


def describe_nodes(nodes: list[object], view: str, prefix: str) -> list[NodeInfo]:
    """NodeInfo for each of `nodes` (inputs first), ids `prefix` + index, all read by `view`."""
    ids = {id(n): f"{prefix}n{i}" for i, n in enumerate(nodes)}
    out = []
    for node in nodes:
        states = _states(node)
        key_cols = getattr(node, "key_cols", getattr(node, "left_keys", ()))
        schema = getattr(node, "schema", ())
        source_schema = (getattr(node, "inputs", ()) or [node]).__getitem__(0).schema
        out.append(
            NodeInfo(
                id=ids[id(node)],
                operator=type(node).__name__,
                detail=node.describe(),  # type: ignore[attr-defined]
                inputs=[ids[id(p)] for p in getattr(node, "inputs", ()) if id(p) in ids],
                stateful=bool(getattr(node, "stateful", False)),
                key=[str((source_schema if key_cols and max(key_cols) >= len(schema) else schema)[c])
                     for c in key_cols],
                partial=bool(getattr(node, "partial", False)),
                present_keys=sum(s.present_keys() for s in states),  # type: ignore[attr-defined]
                rows=sum(s.row_count() for s in states),  # type: ignore[attr-defined]
                views=[view],
            )
        )
    return out
