"""SkriptND models: a `.sknd` file or a folder with `main.sknd`, composed into ir.Graph.

`load_skriptnd(path, ...)` parses the main module, picks its first graph (or the one named),
composes it with the standard modules, loads @variable data from `.dat` files and verifies the
result. Variable data files are named by the variable's scoped name (2.7, 2.10): for `conv1.w`
qsim reads `conv1.w.dat`, or else `conv1/w.dat`, in the model folder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .. import ir
from ..errors import DataError, SemanticError, UsageError
from ..tensorfile import read_tensor, resolve_tensor_path
from .compose.composer import ComposeOptions, Composer
from .integer_form import to_ir_form
from .modules import ModuleSet
from .values import TensorValue

DEFAULT_KEEP = frozenset()


@dataclass
class Composed:
    """One composed graph with what `qsim check` reports besides the graph itself."""
    graph: ir.Graph
    missing_data: list = field(default_factory=list)
    notes: list = field(default_factory=list)        # located remarks that are not errors


def _data_loader(folder: str | None):
    def load(scoped: str, template: TensorValue):
        if folder is None:
            return None
        for rel in (scoped + ".dat", "/".join(scoped.split(".")) + ".dat"):
            # refuses a file that resolves (through a symbolic link) outside the model folder
            path = resolve_tensor_path(folder, rel, f"variable '{scoped}'")
            if os.path.isfile(path):
                return read_tensor(path, expected_shape=tuple(template.shape))
        return None
    return load


def open_model(path: str) -> tuple[ModuleSet, str]:
    """(modules with the main module loaded, main module key) for a .sknd file or model folder."""
    if os.path.isdir(path):
        main = os.path.join(path, "main.sknd")
        if not os.path.isfile(main):
            raise UsageError(f"{path} is a folder without main.sknd",
                             hint="a SkriptND model folder holds main.sknd (2.15)")
        folder = path
    elif os.path.isfile(path):
        main = path
        folder = os.path.dirname(os.path.abspath(path))
    else:
        raise UsageError(f"no such file or folder: {path}")
    modules = ModuleSet(folder)
    modules.load_file(main, "main")
    return modules, "main"


def compose_graphs(path: str, *, graph: str | None = None, all_graphs: bool = False,
                   keep: Iterable[str] = DEFAULT_KEEP, attribs: Mapping[str, Any] | None = None,
                   require_data: bool = True) -> list[Composed]:
    modules, main = open_model(path)
    module = modules.modules[main]
    graphs = module.graphs
    if not graphs:
        raise SemanticError(f"{path}: the main module defines no graph (2.15)",
                            hint="write 'graph Name { ... }' in main.sknd")
    unresolved = unresolved_imports(modules, module)
    if graph is not None:
        chosen = [g for g in graphs if g.name == graph]
        if not chosen:
            raise UsageError(f"{path} has no graph '{graph}'",
                             hint="graphs: " + ", ".join(g.name for g in graphs))
    else:
        chosen = list(graphs) if all_graphs else [graphs[0]]
    options = ComposeOptions(keep=frozenset(keep), attribs=dict(attribs or {}),
                             load_variable=_data_loader(modules.folder))
    results = []
    for g in chosen:
        composer = Composer(modules, options)
        built, missing = composer.compose_graph(g)
        if missing and require_data:
            where = next((d.loc for d in g.variables if d.name == missing[0]), g.loc)
            raise DataError(f"graph '{g.name}': no data file for variable '{missing[0]}'"
                            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                            location=where,
                            hint=f"put {missing[0]}.dat next to main.sknd (NNEF tensor file)")
        if not missing:
            built = to_ir_form(built).verify()
        results.append(Composed(built, missing, unresolved))
    return results


def unresolved_imports(modules: ModuleSet, module) -> list[str]:
    """Imports naming no module, as located notes. They are not errors by themselves: NNEF-Tools'
    own test models import modules outside chapter 4 (`layer`, `rand`, `misc`) that most of their
    graphs never use; a graph that invokes an operator of one fails there, located (ModuleSet.resolve)."""
    notes = []
    for imp in module.imports:
        try:
            modules.module(imp.module, imp.loc)
        except SemanticError as err:
            if not err.message.startswith("unknown module"):
                raise
            notes.append(f"{imp.loc}: import of unknown module '{imp.module}' (unused by the composed graphs)")
    return notes


def load_skriptnd(path: str, *, graph: str | None = None, keep: Iterable[str] = DEFAULT_KEEP,
                  attribs: Mapping[str, Any] | None = None, require_data: bool = True) -> ir.Graph:
    return compose_graphs(path, graph=graph, keep=keep, attribs=attribs, require_data=require_data)[0].graph
