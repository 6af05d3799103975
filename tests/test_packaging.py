"""What a wheel user gets: every data file the code opens is in the built package.

A non-editable install once lacked qsim/nnef1/stdlib.nnef, so every NNEF 1.0 load failed; the
editable install the suite runs under could not see it. These tests build the package the way
the wheel does (setup.py build_py, no compilation) and look at what it holds.
CI also builds the real wheel and runs every command from it in a fresh venv (.ci/wheel-smoke).
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Where each shipped package's files come from (setup.py maps stdlib/ and hw/ into qsim).
SOURCE_ROOTS = {"qsim": REPO / "qsim", "qsim/stdlib": REPO / "stdlib", "qsim/hw": REPO / "hw"}
NOT_DATA = (".py", ".pyc", ".pyx", ".pxd", ".c", ".so", ".html")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The package as build_py lays it out, from a copy of the source files only.

    The copy matters: a qsim.egg-info left in the checkout by an editable install lists
    files that setuptools would then ship even when setup.py forgets them.
    """
    source = tmp_path_factory.mktemp("source")
    listing = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listing):
        if (REPO / name).is_file() and not (REPO / name).is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("build_py")
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],
                   cwd=source, check=True, capture_output=True,
                   env={**os.environ, "QSIM_BUILD_NO_KERNELS": "1"})
    return out


def tracked_files(folder: Path) -> list[Path]:
    listing = subprocess.run(["git", "ls-files", "-z", str(folder)], cwd=REPO,
                             capture_output=True, check=True).stdout.decode().split("\0")
    return [REPO / name for name in listing if name]


def test_every_tracked_data_file_ships(built):
    missing = []
    for target, source in SOURCE_ROOTS.items():
        for path in tracked_files(source):
            rel = path.relative_to(source)
            if target == "qsim" and rel.parts[0] in ("stdlib", "hw"):
                continue
            if path.suffix in NOT_DATA or path.is_symlink():
                continue
            if not (built / target / rel).is_file():
                missing.append(str(path.relative_to(REPO)))
    assert missing == [], f"not in the built package: {missing}"


def test_kernel_sources_are_not_shipped_as_data(built):
    # the compiled extension ships; its .pyx/.c sources do not need to
    assert not list(built.rglob("*.pyx"))


# Calls through which the code opens one of its own files by a literal name:
# resources.files(...).joinpath("x"), Lark.open("x", rel_to=__file__), stdlib_text("x").
# (A user's file, such as source.read_text("graph.quant"), is not package data.)
OPENER_NAMES = {"joinpath", "open", "stdlib_text"}
PACKAGE_ROOTS = {"files", "Lark"}     # what a package-data opener's receiver chain starts from


def _opens_package_data(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id == "stdlib_text"
    if not isinstance(func, ast.Attribute) or func.attr not in OPENER_NAMES:
        return False
    receiver = func.value
    while True:
        if isinstance(receiver, ast.Call):
            receiver = receiver.func
        elif isinstance(receiver, ast.Attribute):
            if receiver.attr in PACKAGE_ROOTS:
                return True
            receiver = receiver.value
        else:
            return isinstance(receiver, ast.Name) and receiver.id in PACKAGE_ROOTS


def opened_resource_names() -> list[tuple[Path, str]]:
    """(module, literal file name) for every data file the code opens by name."""
    found = []
    for module in sorted((REPO / "qsim").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not isinstance(node, ast.Call):
                continue
            if not _opens_package_data(node.func):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and re.fullmatch(r"[\w.-]+\.[a-z]+", arg.value) \
                        and not arg.value.startswith("qsim."):
                    found.append((module, arg.value))
    return found


def test_every_file_the_code_opens_ships(built):
    names = opened_resource_names()
    # the scan must see the known openers, or it proves nothing
    seen = {name for _, name in names}
    assert {"skriptnd.lark", "nnef1.lark", "stdlib.nnef", "harness.cpp"} <= seen
    shipped = {p.name for p in built.rglob("*") if p.is_file()}
    missing = sorted({f"{m.relative_to(REPO)}: {n}" for m, n in names if n not in shipped})
    assert missing == [], f"opened by the code but not in the built package: {missing}"


def test_standard_modules_and_embedded_model_ship(built):
    stdlib = {p.stem for p in (built / "qsim" / "stdlib").glob("*.sknd")}
    assert {"layout", "math", "nn", "tosa", "cvm", "quant"} <= stdlib
    assert (built / "qsim" / "zoo" / "fashion_cnn" / "main.sknd").is_file()
    assert list((built / "qsim" / "zoo" / "fashion_cnn").glob("*.dat"))


def test_version_matches_pyproject():
    import tomllib
    from qsim.version import __version__
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__
