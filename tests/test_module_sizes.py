"""Code sizes a newcomer can read (issue 32): modules of at most 600 lines, functions of fewer
than 130, and no folder with more than 20 modules side by side, in qsim/ and hw/.

PENDING names what other branches are splitting at the time of writing (drop an entry once
its split is in); nothing else may exceed a limit.
"""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = (REPO / "qsim", REPO / "hw")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 129
MAX_MODULES_PER_FOLDER = 20
PENDING = {
    "modules": set(),
    "folders": set(),
}


def _modules():
    for root in ROOTS:
        yield from sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_modules_have_at_most_600_lines():
    long = {_rel(p) for p in _modules() if len(p.read_text().splitlines()) > MAX_MODULE_LINES}
    assert long <= PENDING["modules"], sorted(long - PENDING["modules"])


def test_functions_have_fewer_than_130_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{_rel(path)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_no_folder_holds_more_than_20_modules():
    counts = Counter(_rel(p.parent) for p in _modules())
    crowded = {folder for folder, n in counts.items() if n > MAX_MODULES_PER_FOLDER}
    assert crowded <= PENDING["folders"], sorted(crowded - PENDING["folders"])
