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
    # A stateful node whose state the fields above do not describe (a nested circuit's).
    unmeasured: bool = False

