"""The `pomoview` command line: its parser and commands (commands.py), how it types the
values it is given (values.py), `subscribe`'s printing (subscribe.py) and `explain`'s
rendering (explain.py)."""

from pomoview.server.cli.commands import main

__all__ = ["main"]
