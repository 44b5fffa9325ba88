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
        """`file:line:col: error: reason`, then the source line and a caret under the spot."""
        lines = source_lines(self.text)
        out: list[str] = []
        for d in self.diagnostics:
            line, col = d.position.line, d.position.column
            out.append(f"{self.filename}:{line}:{col}: error: {d.message}")
            if 1 <= line <= len(lines):
                out.extend(_excerpt(lines[line - 1], col))
        return "\n".join(out)


def source_lines(text: str) -> list[str]:
    """The lines as the parser counts them: only "\n" ends a line (str.splitlines would also
    split at "\u2028", "\x0c", ... inside strings and comments, shifting line numbers)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


_WIDTH = 160  # longer source lines are shown as a window around the caret


def _excerpt(source: str, col: int) -> list[str]:
    start = 0
    if len(source) > _WIDTH:
        start = max(0, min(col - 1 - _WIDTH // 2, len(source) - _WIDTH))
        shown = source[start : start + _WIDTH]
        prefix, suffix = ("..." if start else ""), ("..." if start + _WIDTH < len(source) else "")
        source, start = prefix + shown + suffix, start - len(prefix)
    # Keep tabs under tabs so that the caret lines up however wide a tab is shown.
    pad = "".join("\t" if c == "\t" else " " for c in source[: max(col - 1 - start, 0)])
    return [f"    {source}", f"    {pad}^"]


class ErrorSink:
    """Collects diagnostics so one pass can report every problem it finds."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.diagnostics: list[Diagnostic] = []
        self._seen: set[Diagnostic] = set()  # a pass may meet the same problem twice
        self.unsupported = False

    def error(self, position: Position, message: str) -> None:
        diagnostic = Diagnostic(position, message)
        if diagnostic not in self._seen:
            self._seen.add(diagnostic)
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
