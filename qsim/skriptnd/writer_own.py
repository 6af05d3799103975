"""Operators a model defines itself, for the writer: their SkriptND text as the model wrote it.

A graph composed from a model folder keeps each primitive model operator's definition on its
ops (ir.Op.definition, with the source location). The writer copies that text verbatim:
- an operator of the main module: its definition, from `operator` to the matching `}`,
  written into the new main.sknd before the graph;
- an operator of another module of the folder: the whole module file, written under its name
  (so the module keeps its own imports and helper definitions).
Copying (rather than re-printing the AST) keeps write -> load -> write identical.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UnsupportedError
from . import ast


def _source(d: ast.OperatorDef, where: str) -> str:
    loc = d.loc
    try:
        return Path(loc.file).read_text(encoding="utf-8")
    except (OSError, TypeError):
        raise UnsupportedError(f"{where}: the definition of operator '{d.name}' ({loc}) cannot be "
                               "read back, so the model cannot be written",
                               hint="keep the source model folder while writing") from None


def definition_text(d: ast.OperatorDef, where: str) -> str:
    """The text of `d` from its first character to its closing brace (comments and strings
    may hold braces: they are skipped)."""
    text = _source(d, where)
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[:d.loc.line - 1]) + d.loc.column - 1
    depth, i, opened = 0, start, False
    while i < len(text):
        ch = text[i]
        if ch == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        if ch in "'\"":
            end = text.find(ch, i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if ch == "{":
            depth += 1
            opened = True
        elif ch == "}":
            depth -= 1
            if opened and depth == 0:
                return text[start:i + 1]
        i += 1
    raise UnsupportedError(f"{where}: the definition of operator '{d.name}' at {d.loc} has no "
                           "closing brace in its source file")


def module_text(d: ast.OperatorDef, where: str) -> str:
    """The whole source file of the (non-main) module defining `d`."""
    return _source(d, where)
