"""Every third-party package qsim's code imports is declared in pyproject.toml.

The wheel check of CI installs qsim alone (no test extra) into a fresh venv: a package that only
arrives through the test extra, or through another package's dependencies, works in the
developer's venv and breaks the user's (seen: `flatbuffers`, which onnxruntime brought along,
imported by qsim.tflite when the command line was built). So the rule is checked from the source:
- an import at module level runs whenever its module does: its distribution is a required
  dependency;
- an import inside a function (deferred) runs only for the feature that needs it: its
  distribution is required or named in an optional extra (the feature's error names the extra).
The cocotb testbench (qsim/npu/cocotb_tb/) runs inside cocotb's simulator process, whose imports
are the testbench's own modules and cocotb (the `test` extra); it is checked as deferred code.
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "qsim"
TESTBENCH = PACKAGE / "npu" / "cocotb_tb"
# the testbench's own modules, found beside it on cocotb's module path
TESTBENCH_LOCAL = {path.stem for path in TESTBENCH.glob("*.py")}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirement_name = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
    required = {_normalise(requirement_name.match(r).group(1)) for r in project["dependencies"]}
    optional = {_normalise(requirement_name.match(r).group(1))
                for extra in project.get("optional-dependencies", {}).values() for r in extra}
    return required, optional


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level module name, line, at module level) of every absolute import in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module_level = {id(node) for node in tree.body}
    for node in tree.body:   # imports under a module-level if/try still run on import
        if isinstance(node, (ast.If, ast.Try)):
            module_level.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            found.append((name.split(".")[0], node.lineno, id(node) in module_level))
    return found


def _third_party(top: str) -> bool:
    return top not in sys.stdlib_module_names and top != "qsim" and top != "__future__"


def test_every_imported_package_is_declared():
    required, optional = _declared()
    distributions = importlib.metadata.packages_distributions()
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        in_testbench = TESTBENCH in path.parents
        for top, line, at_module_level in _imports(path):
            if not _third_party(top) or (in_testbench and top in TESTBENCH_LOCAL):
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            names = distributions.get(top)
            if not names:
                problems.append(f"{where}: imports {top!r}, which no installed distribution provides")
                continue
            dists = {_normalise(n) for n in names}
            if at_module_level and not in_testbench:
                if not dists & required:
                    problems.append(f"{where}: imports {top!r} at module level; add "
                                    f"{sorted(dists)[0]!r} to [project] dependencies")
            elif not dists & (required | optional):
                problems.append(f"{where}: imports {top!r}; declare {sorted(dists)[0]!r} as a "
                                "dependency or in the extra of the feature that needs it")
    assert not problems, "\n".join(problems)


def test_the_checker_sees_a_module_level_import(tmp_path):
    # The rule above would pass vacuously if _imports found nothing: it must see both kinds.
    source = tmp_path / "m.py"
    source.write_text("import numpy\ntry:\n    import lark\nexcept ImportError:\n    pass\n"
                      "def f():\n    import matplotlib.pyplot\n")
    assert _imports(source) == [("numpy", 1, True), ("lark", 3, True), ("matplotlib", 7, False)]
