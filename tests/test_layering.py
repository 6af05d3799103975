"""qsim's units import one way (docs/architecture.md, DESIGN.md "Layering").

Every `import` of a qsim module, at module level or inside a function, goes from a unit to a
unit of the same or a lower layer; no two units import each other, directly or round a cycle;
and an import inside a function is there only to defer a real cost, said on the line with
`# deferred: <reason>` (for example a unit that pulls in amaranth or matplotlib).

Run as a script (`python tests/test_layering.py`) to list every violation.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "qsim"

# Layers, lowest first. A unit is a top-level module or subpackage of qsim.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("errors", "ir", "numerics", "version", "tensorfile", "tensorbits", "atomic", "limits",
              "textfile", "outpath", "cachedir", "threads", "pinned", "progress", "userdata", "zoo",
              "_checkout")),
    ("front ends", ("skriptnd", "nnef1", "onnx")),
    ("model loading", ("loader",)),
    ("dialects", ("tosa", "cvm", "kernels")),
    ("runtime", ("runtime",)),
    ("quantize", ("quant",)),
    ("npu", ("npu", "hw")),
    ("report", ("report",)),
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


def imports_of(path: Path) -> list[Import]:
    source_text = path.read_text(encoding="utf-8")
    lines = source_text.splitlines()
    tree = ast.parse(source_text)
    module = _module_name(path)
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



def test_npu_takes_its_model_from_the_command():
    assert sideways_violations() == []

if __name__ == "__main__":
    problems = violations() + sideways_violations()
    print("\n".join(problems) or "no layering violations")
    print(f"{len(problems)} violation(s)", file=sys.stderr)
