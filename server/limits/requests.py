"""The server's input limits: one table of `serve` flags, and the checks that enforce them.

A request past a limit is refused with RESOURCE_EXHAUSTED, naming what was too large, the
limit, its flag and its environment variable; it changes nothing. To add a limit (e.g. for
a new RPC): add a `Limit` row to `LIMITS` and a field of the same name to `Limits`, then
call `Limits.check(name, what, got)` where the request is read. The flag, its environment
variable, `serve --help`, the configuration log line and `SERVE_ENV` follow from the row.

Standard library only (and server.errors): `pomoview serve --help` builds its parser from
this table on a client-only install too.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from pomoview.server.errors import ResourceExhausted

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


@dataclass(frozen=True)
class Limit:
    name: str  # the `Limits` field and the configuration setting
    default: int
    in_bytes: bool  # parsed with K, M, G suffixes, shown as such
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "POMOVIEW_" + self.name.upper()

    def show(self, value: int) -> str:
        if self.in_bytes:
            for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
                if value % unit == 0:
                    return f"{value // unit}{suffix}"
        return str(value)

    def parse(self, text: str) -> int:
        pattern = r"\s*(\d+)\s*([kmg]?)(?:i?b)?\s*" if self.in_bytes else r"\s*(\d+)\s*"
        match = re.fullmatch(pattern, text.lower().replace("_", ""))
        if match is None:
            unit = "a size in bytes (say 1048576 or 1M)" if self.in_bytes else "a whole number"
            raise ValueError(f"expected {unit}, got {text!r}")
        value = int(match.group(1)) * (_UNITS[match.group(2)] if self.in_bytes else 1)
        if value <= 0:
            raise ValueError(f"a limit must be positive, got {text!r}")
        return value


LIMITS: tuple[Limit, ...] = (
    Limit(
        "max_message_bytes",
        64 << 20,
        True,
        "the largest gRPC message the server receives or sends (RESOURCE_EXHAUSTED past it, "
        "naming the view for a lookup's answer). pomoview's clients take 64M by default "
        "(Client(max_message_bytes=...)); other gRPC clients 4M, grpc's default",
    ),
    Limit("max_program_bytes", 1 << 20, True, "the largest program text Install accepts (UTF-8)"),
    Limit("max_rules", 10_000, False, "rules per program"),
    Limit(
        "max_rule_atoms",
        1_000,
        False,
        "body literals (atoms, negations, aggregates, constraints) per rule",
    ),
    Limit(
        "max_plan_depth",
        20_000,
        False,
        "the estimated depth of a program's dataflow: operators on the longest chain from a "
        "relation down to the sources (a rule adds one per body literal, a relation one); an "
        "upquery's memory and time grow with it",
    ),
    Limit("max_lookup_keys", 100_000, False, "keys per Lookup"),
    Limit("max_write_rows", 100_000, False, "rows per Write (inserts and deletes of all sources)"),
)
BY_NAME = {limit.name: limit for limit in LIMITS}


class LimitConfigError(ValueError):
    """A limit flag or variable that is not a positive number; the message names it."""


@dataclass(frozen=True)
class Limits:
    max_message_bytes: int = BY_NAME["max_message_bytes"].default
    max_program_bytes: int = BY_NAME["max_program_bytes"].default
    max_rules: int = BY_NAME["max_rules"].default
    max_rule_atoms: int = BY_NAME["max_rule_atoms"].default
    max_plan_depth: int = BY_NAME["max_plan_depth"].default
    max_lookup_keys: int = BY_NAME["max_lookup_keys"].default
    max_write_rows: int = BY_NAME["max_write_rows"].default

    @classmethod
    def resolve(cls, config: Mapping[str, tuple[str, str]]) -> Limits:
        """From `resolve_serve_config`'s (text, origin) per setting; an empty text is the default."""
        values: dict[str, int] = {}
        for limit in LIMITS:
            text, origin = config.get(limit.name, ("", "default"))
            if not text:
                continue
            try:
                values[limit.name] = limit.parse(text)
            except ValueError as err:
                where = limit.flag if origin == "flag" else origin
                raise LimitConfigError(f"{where}: {err}") from None
        return cls(**values)

    def describe(self) -> dict[str, str]:
        return {f.name: BY_NAME[f.name].show(getattr(self, f.name)) for f in fields(self)}

    def exceeded(self, name: str, what: str, got: int) -> ResourceExhausted:
        limit = BY_NAME[name]
        return ResourceExhausted(
            f"{what} is {got:,}, more than the limit of {getattr(self, name):,} "
            f"({limit.flag}, env {limit.env})"
        )

    def check(self, name: str, what: str, got: int) -> None:
        """Raises ResourceExhausted if `got` is past the limit `name`."""
        if got > getattr(self, name):
            raise self.exceeded(name, what, got)

    def check_answer(self, view: str, size: int, *, subscription: bool = False) -> None:
        """Raises ResourceExhausted for an answer of `size` bytes past `max_message_bytes`
        (a lookup's, or a subscription's message), saying how to ask for less: gRPC would
        refuse to send it with a message naming no view and no flag."""
        if size > self.max_message_bytes:
            what = "a subscription's message" if subscription else "the answer"
            err = self.exceeded("max_message_bytes", f"{what} of {view!r} in bytes", size)
            advice = (
                "subscribe to fewer keys at a time"
                if subscription
                else "look up fewer keys at a time, or pages (limit, after) of a view declared "
                "with `order by`"
            )
            raise ResourceExhausted(f"{err.message}; {advice}")

    def grpc_options(self) -> list[tuple[str, int]]:
        return [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
        ]


def env_settings() -> dict[str, tuple[str, str]]:
    """The limits' rows for `SERVE_ENV`: setting -> (environment variable, default)."""
    return {limit.name: (limit.env, limit.show(limit.default)) for limit in LIMITS}


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "limits", "Requests past a limit get RESOURCE_EXHAUSTED naming it; they change nothing."
    )
    for limit in LIMITS:
        unit = "BYTES" if limit.in_bytes else "N"
        suffix = " (K, M, G: powers of 1024)" if limit.in_bytes else ""
        group.add_argument(
            limit.flag,
            default=None,
            metavar=unit,
            help=f"{limit.help}{suffix} (env {limit.env}, default {limit.show(limit.default)})",
        )
