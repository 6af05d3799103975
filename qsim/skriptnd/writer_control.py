"""The writer's control flow: `control.if` and `control.loop` ops back to SkriptND (2.10.1).

Each subgraph is written as a block `{ statements yield results; }` whose statements the writer
writes in the block's scope. compose/control.py names a body's tensors `<label>.then.<name>`,
`<label>.else.<name>`, `<label>.body.<name>`, `<label>.cond.<name>`, `<label>.post_cond.<name>`,
where `<label>` is the (scoped) name of the single result, else `if` / `loop`: targets written
without that prefix get the same names back. Loop-carried values and scanned items keep the
local names their body gives them. What cannot come back the same (names outside that scheme, a
branch written with `elif`) is normalized by the first write.
"""
from __future__ import annotations

from .. import ir
from ..errors import UnsupportedError


def write_control(w, op: ir.Op, dialects: list) -> str:
    if op.kind.name == "control.if":
        return _write_if(w, op, dialects)
    if op.kind.name == "control.loop":
        return _write_loop(w, op, dialects)
    raise UnsupportedError(f"{op.kind.name} {op.label!r}: operators with subgraphs other than "
                           "control.if and control.loop cannot be written")


def _block(w, g: ir.Graph, prefix: str, dialects: list, where: str) -> str:
    saved = w.prefix
    w.prefix = prefix
    try:
        stmts = w.statements(g.ops, dialects, where)
        yields = ", ".join(w.ref[n] for n in g.outputs)
    finally:
        w.prefix = saved
    return "{ " + " ".join(stmts + [f"yield {yields};"]) + " }"


def _label(w, targets: list[str], default: str) -> str:
    """The label compose/control.py derives: the scoped name of a single result, else `default`."""
    return w.prefix + targets[0] if len(targets) == 1 else default


def _write_if(w, op: ir.Op, dialects: list) -> str:
    where = f"{op.kind.name} {op.label!r}"
    cond = w.ref[op.inputs[0]]
    targets = [w.bind_target(n) for n in op.outputs]
    label = _label(w, targets, "if")
    then = _block(w, op.subgraphs["then_graph"], f"{label}.then.", dialects, where)
    other = _block(w, op.subgraphs["else_graph"], f"{label}.else.", dialects, where)
    return f"{', '.join(targets)} = if {cond} then {then} else {other};"


def _locals(w, g: ir.Graph, prefix: str, count: int, names: list[str] | None) -> list[str]:
    """Local names of a body's own inputs (loop variables, scanned items, the index)."""
    if names is None:
        names = []
        for n in g.inputs[:count]:
            rest = n[len(prefix):] if n.startswith(prefix) else ""
            local = rest if rest and rest.isidentifier() and rest not in w.names.taken \
                and rest not in names else w.names.fresh(rest or "v")
            names.append(local)
    for n, local in zip(g.inputs[:count], names):
        w.ref[n] = local
    return names


def _write_loop(w, op: ir.Op, dialects: list) -> str:
    where = f"{op.kind.name} {op.label!r}"
    a = op.attrs
    n_carried, n_scans, length = a.get("carried", 0), a.get("scans", 0), a.get("scan_length", 0)
    count = a.get("count")
    outs = list(op.outputs)
    carried_outs, scan_items = outs[:n_carried], outs[n_carried:]
    if scan_items and not count:
        raise UnsupportedError(f"{where}: scan outputs without a static iteration count")
    n_scan_outs = len(scan_items) // count if scan_items else 0
    targets = [w.bind_target(n) for n in carried_outs]
    for j in range(n_scan_outs):
        targets.append(w.bind_pack(scan_items[j * count:(j + 1) * count]))
    label = _label(w, targets, "loop")
    inits = [w.ref[n] for n in op.inputs[:n_carried]]
    pos = n_carried
    packs = []
    for _ in range(n_scans):
        packs.append("[" + ", ".join(w.ref[n] for n in op.inputs[pos:pos + length]) + "]")
        pos += length
    count_text = str(count) if count is not None else ""
    if a.get("dynamic_count"):
        count_text = w.ref[op.inputs[pos]]
    own = n_carried + n_scans + (1 if a.get("index") else 0)
    body = op.subgraphs["body_graph"]
    names = _locals(w, body, f"{label}.body.", own, None)
    body_text = _block(w, body, f"{label}.body.", dialects, where)
    parts = []
    if n_carried:
        parts.append("with " + ", ".join(f"{nm} = {init}" for nm, init in zip(names, inits)))
    if n_scans:
        parts.append("for " + ", ".join(f"{nm} : {pk}" for nm, pk in
                                        zip(names[n_carried:n_carried + n_scans], packs)))
    for role, keyword in (("cond_graph", "while"),):
        if role in op.subgraphs:
            g = op.subgraphs[role]
            _locals(w, g, f"{label}.cond.", own, names)
            parts.append(f"{keyword} {_block(w, g, f'{label}.cond.', dialects, where)}")
    iteration = ""
    if a.get("index"):
        iteration = f" ..({names[-1]} -> {count_text})"
    elif count_text and not (n_scans and not a.get("dynamic_count") and count == length):
        iteration = f" ..({count_text})"
    parts.append(f"do{iteration} {body_text}")
    if "post_cond_graph" in op.subgraphs:
        g = op.subgraphs["post_cond_graph"]
        _locals(w, g, f"{label}.post_cond.", own, names)
        parts.append(f"while {_block(w, g, f'{label}.post_cond.', dialects, where)}")
    return f"{', '.join(targets)} = {' '.join(parts)};"
