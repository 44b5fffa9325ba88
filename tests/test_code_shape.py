"""The shape the team keeps the product code in (DEVELOPERS.md, "How the code should feel"):
no file over 600 lines, no function over 80, and no module importing another module's
underscore names (what is shared is public and named for what it is)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("server", "dataflow", "planner", "engine", "client")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def product_files() -> list[Path]:
    files = [p for folder in PRODUCT for p in (ROOT / folder).rglob("*.py")]
    assert len(files) > 100, f"found only {len(files)} product files under {ROOT}"
    return sorted(files)


def test_no_product_file_is_over_600_lines() -> None:
    long = []
    for path in product_files():
        lines = path.read_text().count("\n")
        if lines > MAX_FILE_LINES:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not long, "split these along their seams:\n" + "\n".join(long)


def test_no_product_function_is_over_80_lines() -> None:
    long = []
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not long, "split these into functions named for what each part does:\n" + "\n".join(long)


def test_no_module_imports_another_modules_underscore_names() -> None:
    crossing = []
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pomoview."):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        crossing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}")
    assert not crossing, "make these public, named for what they are:\n" + "\n".join(crossing)
