"""ARCHITECTURE.md, checked against the code: the import rules and their exceptions, read from
its tables, hold for every .py file of the repository (imports inside functions too), and
its folders table has a row for every folder that holds Python code, and no other.

The rules live in the document only: this file knows how to read them, not what they say.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "ARCHITECTURE.md"
# Not the project's code: the environment, the build's leftovers, git.
SKIPPED = {".venv", ".git", "build", "dist", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
STDLIB = "stdlib"
OPEN = "open()"
# The top-level folders installed as pomoview.<folder> (pyproject.toml's package-dir).
LAYERS = ("proto", "client", "dataflow", "planner", "engine", "server")


# -- the document --------------------------------------------------------------------------


def section_table(text: str, title: str) -> list[list[str]]:
    """The rows (cells, stripped) of the first Markdown table after the heading `## title`,
    header and separator left out."""
    lines = text.splitlines()
    start = lines.index(f"## {title}")
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the table has ended
    assert len(rows) > 2, f"no table under '## {title}' in {DOC.name}"
    assert set(rows[1]) <= {"---", ":---", "---:", ":---:"}, rows[1]
    return rows[2:]


def names(cell: str) -> list[str]:
    """`a`, `b.c` -> [a, b.c]; — -> []."""
    cell = cell.strip()
    if cell in ("—", "-", ""):
        return []
    return [part.strip().strip("`").strip() for part in cell.split(",")]


def folder(cell: str) -> str:
    """`server/api/` -> server/api"""
    match = re.fullmatch(r"`([\w./]+)/`", cell)
    assert match, f"a folder is written as `path/`: {cell!r}"
    return match[1]


@dataclass(frozen=True)
class Rule:
    folder: str
    ours: tuple[str, ...]  # module names under pomoview., a name allowing its submodules
    mode: str  # "any", "only" or "any but"
    others: tuple[str, ...]  # the list of `only:` or `any but:`


@dataclass(frozen=True)
class Exception_:
    file: str
    module: str


def parse_rule(cells: list[str]) -> Rule:
    assert len(cells) == 3, cells
    where, ours, others = cells
    if others == "any":
        mode, listed = "any", []
    else:
        match = re.fullmatch(r"(only|any but): (.+)", others)
        assert match, f"other modules are `any`, `only: a, b` or `any but: a, b`: {others!r}"
        mode, listed = match[1], names(match[2])
    return Rule(folder(where), tuple(names(ours)), mode, tuple(listed))


def read_doc() -> tuple[dict[str, Rule], list[Exception_], dict[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    rules: dict[str, Rule] = {}
    for cells in section_table(text, "Import rules"):
        rule = parse_rule(cells)
        assert rule.folder not in rules, f"two rules for {rule.folder}/"
        rules[rule.folder] = rule
    exceptions = []
    for cells in section_table(text, "Exceptions"):
        assert len(cells) == 3, cells
        exceptions.append(Exception_(cells[0].strip("`"), cells[1].strip("`")))
    folders: dict[str, str] = {}
    for cells in section_table(text, "Folders"):
        assert len(cells) == 2 and cells[1], cells
        assert folder(cells[0]) not in folders, f"two rows for {cells[0]}"
        folders[folder(cells[0])] = cells[1]
    return rules, exceptions, folders


# -- the code ------------------------------------------------------------------------------


def python_files() -> list[Path]:
    """Every .py file of the repository, relative to it."""
    out = []
    for top, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIPPED and not d.endswith(".egg-info")]
        out += [(Path(top) / f).relative_to(REPO) for f in files if f.endswith(".py")]
    return sorted(out)


def module_file(module: str) -> Path | None:
    """The file of `pomoview.a.b` (a/b.py or a/b/__init__.py, from the repository root: each
    top-level folder is installed as pomoview.<folder>), or None."""
    parts = module.split(".")
    if parts[0] != "pomoview" or len(parts) < 2:
        return None
    base = REPO.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(REPO)
    return None


def module_of(file: Path) -> str:
    """The dotted name a file is imported as: pomoview.<path> for the layers, else its path."""
    parts = list(file.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["pomoview", *parts] if file.parts[0] in LAYERS else parts)


@dataclass(frozen=True)
class Use:
    line: int
    module: str  # absolute, dotted; OPEN for a call of the built-in open


def uses(file: Path, source: str | None = None) -> list[Use]:
    """What `file` (or `source`, as if it were that file) imports, anywhere in it (functions
    included), resolved to absolute module names; `from m import n` names m.n when that is a
    module of ours; calls of the built-in open; importlib.import_module / __import__ of a
    constant name."""
    text = (REPO / file).read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, str(file))
    package = module_of(file) if file.name == "__init__.py" else module_of(file).rpartition(".")[0]
    found: list[Use] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Use(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.append(Use(node.lineno, sub if module_file(sub) is not None else module))
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "open":
                found.append(Use(node.lineno, OPEN))
            elif isinstance(func, ast.Attribute) and func.attr == "open" and (
                isinstance(func.value, ast.Name) and func.value.id == "builtins"
            ):
                found.append(Use(node.lineno, OPEN))
            dynamic = (isinstance(func, ast.Name) and func.id == "__import__") or (
                isinstance(func, ast.Attribute) and func.attr == "import_module"
            )
            if dynamic and node.args and isinstance(node.args[0], ast.Constant):
                if isinstance(node.args[0].value, str):
                    found.append(Use(node.lineno, node.args[0].value))
    return found


def governing(rules: dict[str, Rule], file: Path) -> Rule | None:
    """The rule of the most specific folder holding `file`."""
    best: Rule | None = None
    for where, rule in rules.items():
        if file.parts[: len(Path(where).parts)] == Path(where).parts:
            if best is None or len(Path(where).parts) > len(Path(best.folder).parts):
                best = rule
    return best


def within(module: str, name: str) -> bool:
    return module == name or module.startswith(name + ".")


def violation(rules: dict[str, Rule], rule: Rule, use: Use) -> str | None:
    """Why `use` breaks `rule`, or None."""
    module = use.module
    if module.startswith("pomoview.") or module == "pomoview":
        target = module_file(module)
        if target is not None and governing(rules, target) == rule:
            return None  # its own row's code
        ours = module.removeprefix("pomoview.")
        if any(within(ours, name) for name in rule.ours):
            return None
        return f"imports {module}, not among {rule.folder}/'s: {', '.join(rule.ours) or '—'}"
    if rule.mode == "any":
        return None
    if module == OPEN:  # not an import: forbidden only where `any but:` names it
        return f"calls the built-in open(), which {rule.folder}/ may not" if OPEN in rule.others else None
    top = module.split(".")[0]
    listed = any(within(module, name) for name in rule.others)
    if rule.mode == "only":
        if listed or (STDLIB in rule.others and top in sys.stdlib_module_names):
            return None
        return f"imports {module}; {rule.folder}/ may import only: {', '.join(rule.others)}"
    if listed:
        return f"imports {module}, which {rule.folder}/ may not"
    return None


# -- the checks ----------------------------------------------------------------------------


def test_every_import_follows_the_rules_of_architecture_md() -> None:
    rules, exceptions, _ = read_doc()
    for layer in LAYERS:
        assert layer in rules, f"no import rule for the layer {layer}/"
    used: set[Exception_] = set()
    broken: list[str] = []
    files = python_files()
    assert len(files) > 100, f"found only {len(files)} .py files under {REPO}"
    for file in files:
        rule = governing(rules, file)
        if rule is None:
            broken.append(f"{file}: no row of the import rules holds it")
            continue
        for use in uses(file):
            why = violation(rules, rule, use)
            if why is None:
                continue
            excused = next(
                (e for e in exceptions if e.file == str(file) and within(use.module, e.module)), None
            )
            if excused is not None:
                used.add(excused)
            else:
                broken.append(f"{file}:{use.line}: {why}")
    assert not broken, "imports against ARCHITECTURE.md's rules:\n" + "\n".join(dict.fromkeys(broken))
    stale = [e for e in exceptions if e not in used]
    assert not stale, f"exceptions no longer needed (delete their rows): {stale}"


def test_every_folder_of_code_has_a_row_in_the_folders_table() -> None:
    rules, _, folders = read_doc()
    code = {str(file.parent) for file in python_files() if file.parent != Path(".")}
    missing = sorted(code - set(folders))
    assert not missing, f"folders with Python code and no row in ARCHITECTURE.md's folders table: {missing}"
    gone = sorted(set(folders) - code)
    assert not gone, f"rows of ARCHITECTURE.md's folders table for folders with no code: {gone}"
    # Each concept of server has its own import rule: a new one does not inherit server/'s.
    servers = {f for f in code if Path(f).parts[0] == "server" and len(Path(f).parts) == 2}
    unruled = sorted(servers - set(rules))
    assert not unruled, f"server folders with no import rule of their own: {unruled}"
    idle = sorted(set(rules) - code)
    assert not idle, f"import rules for folders with no code: {idle}"


def test_the_walks_are_sections_of_their_own() -> None:
    text = DOC.read_text(encoding="utf-8")
    for walk in ("lookup", "write", "flush"):
        assert f"\n## The walk of a {walk}\n" in text


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import pyspark.sql\n", "pyspark.sql"),
        ("def f():\n    from pomoview.server.types import Value\n", "pomoview.server.types"),
        ("def f():\n    from ..server import errors\n", "pomoview.server.errors"),
        ("def f():\n    return open('x')\n", OPEN),
        ("import importlib\nimportlib.import_module('grpc')\n", "grpc"),
    ],
)
def test_the_reader_of_imports_sees_every_form(source: str, module: str) -> None:
    """The parts of the check that could pass vacuously: an import in a function, a relative
    one, a call of open, a constant dynamic import are each seen, and refused in dataflow/."""
    rules, _, _ = read_doc()
    found = [u.module for u in uses(Path("dataflow/probe.py"), source)]
    assert module in found, found
    assert violation(rules, rules["dataflow"], Use(1, module)) is not None
