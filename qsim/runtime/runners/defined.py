"""Runner of the operators a model defines itself (ir.Op.definition is their SkriptND
definition): executed by their @lower body through the front end's @lower interpreter
(qsim.skriptnd.lower). Packed inputs are regrouped into lists, packed outputs flattened again.
"""
from __future__ import annotations

import numpy as np

from ... import ir
from ...errors import QsimError, UnsupportedError
from ...skriptnd.evaluate import Evaluator, free_names
from ...skriptnd.lower.interpreter import run_lower


def run_defined(op: ir.Op, inputs: list, context) -> list[np.ndarray]:
    d = op.definition
    if not d.lowers:
        raise UnsupportedError(f"{op.kind.name} '{op.label}': operator '{d.name}' has no @lower "
                               "body, so qsim cannot execute it", location=d.loc,
                               hint="give the operator a @lower block, or a @compose block of "
                                    "standard operators")
    grouped = regroup(op, d.inputs, list(inputs), "inputs")
    try:
        outs = run_lower(d, grouped, dict(op.attrs))
    except QsimError as err:
        raise type(err)(f"{op.kind.name} '{op.label}': {err.message}", hint=err.hint,
                        location=err.location) from None
    flat = []
    for decl, value in zip(d.outputs, outs):
        flat.extend(value if decl.type.pack is not None else [value])
    return [np.asarray(v) for v in flat]


def regroup(op: ir.Op, params, flat: list, what: str) -> list:
    """The op's flat tensor list → one entry per declared parameter, a packed one as a list.

    The composer flattens packs into consecutive names (compose/composer.py _emit). Lengths come from the
    definition: `..(n)` with n an attribute evaluates; the one remaining pack takes the rest."""
    packed = [p for p in params if p.type.pack is not None]
    if not packed:
        return flat
    lengths = {}
    for p in packed:
        length = p.type.pack.length
        if length is not None and free_names(length) <= op.attrs.keys():
            try:
                n = Evaluator(dict(op.attrs)).eval(length)
            except QsimError:
                continue
            if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0:
                lengths[p.name] = int(n)      # else (null, run-time): the one unknown pack
    unknown = [p.name for p in packed if p.name not in lengths]
    rest = len(flat) - (len(params) - len(packed)) - sum(lengths.values())
    if len(unknown) > 1 or rest < 0 or (not unknown and rest != 0):
        raise UnsupportedError(f"{op.kind.name} '{op.label}': cannot tell which of its {len(flat)} "
                               f"{what} belong to the packs {', '.join(p.name for p in packed)}",
                               location=op.definition.loc if op.definition is not None else None,
                               hint="give all but one packed parameter a length of attributes, as in ..(n)")
    if unknown:
        lengths[unknown[0]] = rest
    grouped, pos = [], 0
    for p in params:
        n = lengths.get(p.name) if p.type.pack is not None else None
        if n is None:
            grouped.append(flat[pos])
            pos += 1
        else:
            items = flat[pos:pos + n]
            grouped.append(None if n == 1 and items[0] is None else list(items))
            pos += n
    return grouped
