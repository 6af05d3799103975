"""qsim's units import one way (docs/architecture.md, DESIGN.md "Layering").

Every `import` of a qsim module, at module level or inside a function, goes from a unit to a
unit of the same or a lower layer; no two units import each other, directly or round a cycle;
an import inside a function is there only to defer a real cost, said on the line with
`# deferred: <reason>` (for example a unit that pulls in amaranth or matplotlib); no two files
of qsim import each other round a cycle at module level (an import under TYPE_CHECKING
included: a registry lives in a module of its own that the table and its families import);
hw/ (shipped as qsim.hw) imports nothing of qsim but its own modules (DESIGN.md); quant's
sub-packages import one way; and the NPU takes the model the command hands it.

Run as a script (`python tests/test_layering.py`) to list every violation.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "qsim"
HW = PACKAGE.parent / "hw"          # the Amaranth HDL, installed as qsim.hw (setup.py)

# Layers, lowest first. A unit is a top-level module or subpackage of qsim.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("errors", "ir", "numerics", "version", "tensorfile", "tensorbits", "atomic", "limits",
              "textfile", "outpath", "cachedir", "threads", "pinned", "progress", "userdata", "zoo",
              "_checkout")),
    ("front ends", ("skriptnd", "nnef1", "onnx", "tflite")),
    ("model loading", ("loader",)),
    ("dialects", ("tosa", "cvm", "kernels")),
    ("runtime", ("runtime", "cluster")),
    ("quantize", ("quant",)),
    ("npu", ("npu", "hw")),
    ("report", ("report",)),
    ("exploration", ("explore",)),
    ("commands", ("commands", "selftest")),
    ("cli", ("cli", "__main__", "__init__")),
]
LAYER_OF = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}


@dataclass(frozen=True)
class Import:
    source: str          # importing module, e.g. qsim.quant.pipeline
    target: str          # imported module, e.g. qsim.runtime.executor
    path: Path
    line: int
    in_function: bool
    deferred_reason: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(PACKAGE.parent)}:{self.line}"


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        anchor = module.split(".")
        if not is_package:
            anchor = anchor[:-1]
        anchor = anchor[:len(anchor) - node.level + 1]
        base = ".".join(anchor + ([node.module] if node.module else []))
    if node.module is None:     # from . import a, b: each name is a module or an attribute of base
        return [f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base
                for alias in node.names]
    return [base]


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_of(path: Path, module: str | None = None) -> list[Import]:
    """The qsim imports of the file `path`, whose module name is `module` (default: its place
    under PACKAGE)."""
    source_text = path.read_text(encoding="utf-8")
    lines = source_text.splitlines()
    tree = ast.parse(source_text)
    module = module or _module_name(path)
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                targets = _resolve(child, module, is_package)
            else:
                visit(child, inside)
                continue
            text = " ".join(lines[child.lineno - 1:child.end_lineno])
            for target in targets:
                if target == "qsim" or target.startswith("qsim."):
                    found.append(Import(module, target, path, child.lineno, in_function,
                                        "# deferred:" in text))

    visit(tree, False)
    return found


def all_imports() -> list[Import]:
    result = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "hw" in path.relative_to(PACKAGE).parts[:1] and path.is_symlink():
            continue
        result.extend(imports_of(path))
    return result


def violations() -> list[str]:
    problems = []
    edges: dict[str, dict[str, Import]] = {}
    for imp in all_imports():
        src, dst = unit_of(imp.source), unit_of(imp.target)
        if src == dst:
            if imp.in_function and not imp.deferred_reason:
                problems.append(f"{imp.where}: {imp.source} imports {imp.target} inside a function "
                                "(import it at module level, or say why with '# deferred: <reason>')")
            continue
        for unit in (src, dst):
            if unit not in LAYER_OF:
                problems.append(f"{imp.where}: unit qsim.{unit} has no layer in tests/test_layering.py")
        if src not in LAYER_OF or dst not in LAYER_OF:
            continue
        if LAYER_OF[dst] > LAYER_OF[src]:
            problems.append(f"{imp.where}: {imp.source} ({LAYERS[LAYER_OF[src]][0]}) imports "
                            f"{imp.target} ({LAYERS[LAYER_OF[dst]][0]}), a later stage")
        elif imp.in_function and not imp.deferred_reason:
            problems.append(f"{imp.where}: {imp.source} imports {imp.target} inside a function "
                            "(import it at module level, or say why with '# deferred: <reason>')")
        edges.setdefault(src, {}).setdefault(dst, imp)
    problems.extend(_cycles(edges))
    return problems


def _cycles(edges: dict[str, dict[str, Import]]) -> list[str]:
    """One message per import cycle between units (depth-first search over the unit graph)."""
    found, state, stack = [], {}, []

    def visit(unit: str) -> None:
        state[unit] = "open"
        stack.append(unit)
        for nxt, imp in sorted(edges.get(unit, {}).items()):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                hops = [edges[a][b].where for a, b in zip(cycle, cycle[1:])]
                found.append("import cycle " + " → ".join(cycle) + " (" + ", ".join(hops) + ")")
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[unit] = "done"

    for unit in sorted(edges):
        if unit not in state:
            visit(unit)
    return found



def file_cycles() -> list[str]:
    """One message per import cycle between files of qsim (module-level imports only, those
    under TYPE_CHECKING included; an import names the file of the module it imports, not the
    packages around it): the files of each strongly connected component of the graph, and one
    shortest cycle through them with the import that leaves each file towards the next."""
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    edges: dict[str, dict[str, Import]] = {}
    for imp in all_imports():
        target = imp.target
        while target not in modules and "." in target:     # from pkg import name: pkg's file
            target = target.rsplit(".", 1)[0]
        if not imp.in_function and target in modules and target != imp.source:
            edges.setdefault(imp.source, {}).setdefault(target, imp)
    found = []
    for component in _strongly_connected(edges):
        cycle = _cycle_through(component, edges)
        hops = [edges[a][b].where for a, b in zip(cycle, cycle[1:])]
        found.append(f"import cycle among {len(component)} files ({', '.join(component)}), e.g. "
                     + " → ".join(cycle) + " (" + ", ".join(hops) + ")")
    return found


def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The components of more than one file (Tarjan's algorithm, iterative: no recursion
    limit however long a chain of imports is)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _cycle_through(component: list[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """A shortest cycle from the component's first file back to it (breadth-first search
    inside the component), as the list of files with the first one again at the end."""
    start, members = component[0], set(component)
    came_from = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges.get(node, {})):
                if nxt == start:
                    path = [node]
                    while came_from[path[-1]] is not None:
                        path.append(came_from[path[-1]])
                    return list(reversed(path)) + [start]
                if nxt in members and nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    return component + [start]      # unreachable for a strongly connected component


def hw_violations() -> list[str]:
    """Every import in hw/ of a qsim module outside qsim.hw (hw/ imports nothing of qsim but
    its own modules: the HDL stands alone, npu/ drives it)."""
    problems = []
    for path in sorted(HW.rglob("*.py")):
        rel = path.relative_to(HW).with_suffix("")
        parts = ["qsim", "hw", *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        for imp in imports_of(path, ".".join(parts)):
            if imp.target != "qsim.hw" and not imp.target.startswith("qsim.hw."):
                problems.append(f"hw/{path.relative_to(HW)}:{imp.line}: {imp.source} imports {imp.target} "
                                "(hw/ imports nothing of qsim but its own modules)")
    return problems


# quant/'s sub-packages, lowest first (docs/architecture.md, "quant/ by concern"): a sub-package
# imports only sub-packages of a lower rank, and of quant's top modules only those every concern
# shares (never the pipeline or the folder code, which sit above all of them)
QUANT_RANK = {"calibration": 0, "lowering": 1, "evaluation": 2, "rounding": 2, "tosa": 3, "cvm": 3,
              "precision_plan": 3}
QUANT_SHARED = ("params", "accuracy", "options", "target", "rules")


def quant_violations() -> list[str]:
    problems = []
    for imp in all_imports():
        src, dst = imp.source.split("."), imp.target.split(".")
        if src[:2] != ["qsim", "quant"] or dst[:2] != ["qsim", "quant"] or len(src) < 4:
            continue            # only imports made by a module inside a quant sub-package
        here = src[2]
        there = dst[2] if len(dst) > 2 else "__init__"
        if there == here:
            continue
        if there in QUANT_RANK:
            if QUANT_RANK[there] >= QUANT_RANK.get(here, -1):
                problems.append(f"{imp.where}: qsim.quant.{here} imports qsim.quant.{there} "
                                "(quant's sub-packages import only lower ones)")
        elif there not in QUANT_SHARED:
            problems.append(f"{imp.where}: qsim.quant.{here} imports {imp.target} (of quant's top "
                            f"modules a sub-package imports only {', '.join(QUANT_SHARED)})")
    return problems


# The quantize -> simulate path has no sideways ties: the NPU takes the model the command hands
# it (qsim/commands/quantized_model.py loads a folder or quantizes the embedded model), so of
# quant it imports only the model type; the planner and simulate borrow nothing from the
# export-vectors modules (shared planning helpers, such as npu/grouping.py, live in npu/).
NPU_FROM_QUANT = ("qsim.quant.lowering.float_side",)
EXPORT_VECTORS = ("qsim.npu.golden_vectors", "qsim.npu.cocotb_export", "qsim.npu.corner_cases")


def sideways_violations() -> list[str]:
    problems = []
    for imp in all_imports():
        if unit_of(imp.source) == "npu" and unit_of(imp.target) == "quant" and imp.target not in NPU_FROM_QUANT:
            problems.append(f"{imp.where}: {imp.source} imports {imp.target} (the NPU takes the model "
                            "the command hands it; of quant it imports only the model type)")
        if (imp.target in EXPORT_VECTORS and imp.source not in EXPORT_VECTORS
                and imp.source != "qsim.commands.export_vectors"):
            problems.append(f"{imp.where}: {imp.source} imports {imp.target}, an export-vectors module "
                            "(shared helpers belong in a module of their own in npu/)")
    return problems

def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert sorted(units - set(LAYER_OF)) == []


def test_units_import_one_way_without_cycles():
    assert violations() == []


def test_checker_catches_an_upward_function_level_import(tmp_path, monkeypatch):
    # the checker itself: an import of a later stage inside a function is reported
    pkg = tmp_path / "qsim"
    (pkg / "ir").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ir" / "__init__.py").write_text("def f():\n    from ..quant import x\n")
    (pkg / "quant").mkdir()
    (pkg / "quant" / "__init__.py").write_text("from ..ir import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = violations()
    assert any(v.startswith("qsim/ir/__init__.py:2: qsim.ir (core) imports qsim.quant") for v in found)
    assert any(v.startswith("import cycle") for v in found)



def test_no_import_cycle_between_files():
    assert file_cycles() == []


def test_hw_imports_nothing_of_qsim_but_its_own_modules():
    assert sorted(p.name for p in HW.glob("*.py")) and hw_violations() == []



def test_quant_subpackages_import_one_way():
    assert set(QUANT_RANK) == {p.name for p in (PACKAGE / "quant").iterdir() if (p / "__init__.py").exists()}
    assert quant_violations() == []

def test_file_cycle_checker_finds_a_cycle_closed_by_a_typing_import(tmp_path, monkeypatch):
    # a registry imported by its families, closed by a TYPE_CHECKING import; a function-level
    # import does not count
    pkg = tmp_path / "qsim"
    (pkg / "conv").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "conv" / "__init__.py").write_text("")
    (pkg / "conv" / "table.py").write_text("from . import family\n")
    (pkg / "conv" / "family.py").write_text("from .helpers import h\n")
    (pkg / "conv" / "helpers.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .table import T\n")
    (pkg / "conv" / "other.py").write_text("def f():\n    from .table import T  # deferred: test\n")
    (pkg / "conv" / "later.py").write_text("from .other import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = file_cycles()
    assert found == ["import cycle among 3 files (qsim.conv.family, qsim.conv.helpers, qsim.conv.table), "
                     "e.g. qsim.conv.family → qsim.conv.helpers → qsim.conv.table → qsim.conv.family "
                     "(qsim/conv/family.py:1, qsim/conv/helpers.py:3, qsim/conv/table.py:1)"]


def test_hw_checker_catches_an_import_of_qsim(tmp_path, monkeypatch):
    (tmp_path / "hw").mkdir()
    (tmp_path / "hw" / "pe.py").write_text("from .params import Dataflow\nfrom ..ir import DType\n")
    (tmp_path / "hw" / "top.py").write_text("import qsim.npu.config\nfrom qsim.hw import params\n")
    monkeypatch.setattr(sys.modules[__name__], "HW", tmp_path / "hw")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "qsim")
    assert [v.split(" (")[0] for v in hw_violations()] == [
        "hw/pe.py:2: qsim.hw.pe imports qsim.ir", "hw/top.py:1: qsim.hw.top imports qsim.npu.config"]


def test_npu_takes_its_model_from_the_command():
    assert sideways_violations() == []

if __name__ == "__main__":
    problems = (violations() + file_cycles() + hw_violations() + quant_violations()
                + sideways_violations())
    print("\n".join(problems) or "no layering violations")
    print(f"{len(problems)} violation(s)", file=sys.stderr)
