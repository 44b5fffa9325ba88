"""Positioned program errors, printed as a compiler prints them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    line: int
    column: int


@dataclass(frozen=True)
class Diagnostic:
    position: Position
    message: str


class ProgramError(Exception):
    """A program the planner refuses. `unsupported` marks valid PomoLogic this build cannot run."""

    def __init__(
        self,
        diagnostics: list[Diagnostic],
        text: str,
        filename: str = "<program>",
        *,
        unsupported: bool = False,
    ) -> None:
        self.diagnostics = diagnostics
        self.text = text
        self.filename = filename
        self.unsupported = unsupported
        super().__init__(self.render())

    def render(self) -> str:
        lines = self.text.splitlines()
        out: list[str] = []
        for d in self.diagnostics:
            line, col = d.position.line, d.position.column
            out.append(f"{self.filename}:{line}:{col}: error: {d.message}")
            if 1 <= line <= len(lines):
                source = lines[line - 1]
                out.append(f"    {source}")
                out.append("    " + " " * max(col - 1, 0) + "^")
        return "\n".join(out)


class ErrorSink:
    """Collects diagnostics so one pass can report every problem it finds."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.diagnostics: list[Diagnostic] = []
        self.unsupported = False

    def error(self, position: Position, message: str) -> None:
        diagnostic = Diagnostic(position, message)
        if diagnostic not in self.diagnostics:  # a pass may meet the same problem twice
            self.diagnostics.append(diagnostic)

    def unsupported_feature(self, position: Position, message: str) -> None:
        self.unsupported = True
        self.error(position, f"{message} is not supported yet")

    def raise_if_any(self) -> None:
        if self.diagnostics:
            self.diagnostics.sort(key=lambda d: (d.position.line, d.position.column))
            raise ProgramError(
                self.diagnostics, self.text, self.filename, unsupported=self.unsupported
            )
