"""What `qsim check` asks of the SkriptND front end: compose a model's graphs, or validate a
module of operators without graphs (qsim/commands/check.py formats the result)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..errors import QsimError, SemanticError
from .model import Composed, compose_graphs, open_model
from .validate import validate_module


@dataclass(frozen=True)
class CheckedModule:
    """The composed graphs of a model, or, for a module without graphs (a library of
    operators), how many operator definitions were validated statically."""
    composed: tuple[Composed, ...] = ()
    operator_count: int | None = None


def check_skriptnd(path: str, *, all_graphs: bool = False, graph: str | None = None,
                   keep: Iterable[str] = ()) -> CheckedModule:
    """Composes the graph named (or the first), or with `all_graphs` every graph; raises QsimError."""
    modules, main = open_model(path)
    graphs = modules.modules[main].graphs
    if not graphs:
        return CheckedModule(operator_count=validate_module(modules, main))
    if all_graphs:
        return CheckedModule(tuple(_compose_each(path, [g.name for g in graphs], keep)))
    return CheckedModule(tuple(compose_graphs(path, graph=graph, keep=keep, require_data=False)))


def _compose_each(path: str, names: list[str], keep: Iterable[str]) -> list[Composed]:
    """`--all`: every graph is composed even when others fail; failures are reported together, each
    with its location (the error's location is the first failure's)."""
    results, failures = [], []
    for name in names:
        try:
            results.extend(compose_graphs(path, graph=name, keep=keep, require_data=False))
        except QsimError as err:
            failures.append((name, err))
    if failures:
        listing = "\n".join(f"  graph '{name}': {err.format()}".replace("\n", "\n    ") for name, err in failures)
        raise SemanticError(f"{len(failures)} of {len(names)} graphs do not compose "
                            f"({len(results)} do):\n{listing}", location=failures[0][1].location,
                            hint="compose one with --graph NAME to see its summary")
    return results
