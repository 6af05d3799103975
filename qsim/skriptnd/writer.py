"""ir.Graph → SkriptND model folder (main.sknd + one .dat per data tensor), the inverse of load.

`write_model(graph, folder)` writes `main.sknd`, one graph whose @compose invokes each op of the
graph on one line (`import <module>;` for every dialect used: stdlib modules, `tosa`, `cvm`), and
a `.dat` file for every tensor holding data, declared as a @variable (2.7) and named by its
variable name (`<name>.dat`, 2.15). Tensors with a QuantInfo get a @quantize entry (2.14,
`quant.zero_point_linear_quantize`). The folder is published atomically (qsim.atomic).

Guarantee (tested): write → qsim.load → write gives byte-identical folders, and the reloaded graph
computes the same values. What a model folder cannot say is normalized by the first write, so
the second write reproduces it exactly:

- Names. SkriptND identifiers have no dots, but composed graphs name tensors by scope
  (`conv1.acc`, 2.10). A computed tensor whose name is a dotted path of identifiers keeps it: its
  invocation is wrapped in labelled blocks (`conv1_acc = conv1: { acc = op(...); yield acc; };`),
  and a block's label scopes the names inside it exactly as an invocation label does. Graph
  inputs, variables and every other name are written as identifiers (`conv1.w` → `conv1_w`).
  Op names survive as invocation labels when they are identifiers (others are lost).
- Types. SkriptND tensors are `real`, `int` or `bool`. An integer tensor's width is kept in its
  @quantize entry (bits, signed; stdlib/tosa.sknd's convention): a tensor of another integer
  type than int32/int64 without a QuantInfo gets a width-only entry (scale 1, zero point 0,
  symmetric: skriptnd.integer_form.width_quant, the one rule qsim.tosa.sknd_form uses too).
  Integer data files are stored at the entry's width
  when the values fit it, else at 32 bits when they fit, else 64: all decided from what the
  folder itself holds, so a reloaded int64 tensor is stored as before.
- QuantInfo.source is not representable; entries read back as source "annotation".
- Attributes equal to their operator's constant default are left out; generic types are written
  (`op<real>(...)`) only when the inputs and attributes cannot determine them (2.13).

Control-flow ops (control.if, control.loop) are written as `if ... then {...} else {...}` and
`with ... for ... while {...} do ..(i -> n) {...}` blocks (writer_control.py).

Not representable (a located QsimError says which op or tensor): tensor-valued (numpy)
attributes (convert TOSA graphs with qsim.tosa.sknd_form.to_sknd_form first), float16/float64
tensors, a null attribute whose operator default is not null, computed tensors without a
producer, a QuantInfo on a tensor inside a control-flow body.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
from pathlib import Path

import numpy as np

from .. import ir
from ..atomic import atomic_directory
from ..errors import InvalidGraphError, QsimError, UnsupportedError, UsageError
from ..tensorfile import write_tensor
from . import ast
from .evaluate import Evaluator, free_names
from .integer_form import width_quant
from .formatting import RESERVED, format_value, is_identifier, quant_entry
from .modules import ModuleSet
from .writer_control import write_control
from .writer_own import definition_text, module_text
from .values import Uniform, same

DEFAULT_HEADER = "Model written by qsim (SkriptND writer)."
INDENT = "    "
# longest identifier the writer makes: `<identifier>.dat` stays far inside a file name's 255 bytes
MAX_IDENTIFIER = 120
_TYPE_NAMES = {ir.DType.F32: "real", ir.DType.BOOL: "bool"}
# integer widths a data file may be stored at: (bits, signed) → numpy storage dtype
_STORAGE = {(4, True): np.int8, (8, True): np.int8, (8, False): np.uint8, (16, True): np.int16,
            (16, False): np.uint16, (32, True): np.int32, (32, False): np.uint32,
            (48, True): np.int64, (64, True): np.int64}


def write_model(graph: ir.Graph, folder, *, header: str | None = None) -> None:
    """Writes `graph` as a SkriptND model folder at `folder` (replaced atomically if it exists)."""
    target = Path(os.fspath(folder))
    try:
        with atomic_directory(target) as tmp:
            write_model_files(graph, tmp, header=header)
    except OSError as err:
        raise UsageError(f"cannot write the model folder {target}: {err.strerror or err}",
                         hint="choose a writable output folder") from None


def write_model_files(graph: ir.Graph, folder: Path, *, header: str | None = None) -> None:
    """Writes main.sknd, its modules and the .dat files of `graph` into `folder`, a folder being
    built inside qsim.atomic.atomic_directory (the caller's: it may hold other outputs too)."""
    writer = _Writer(graph)
    text, files = writer.render(DEFAULT_HEADER if header is None else header)
    modules = writer.module_files()
    (folder / "main.sknd").write_text(text, encoding="utf-8")
    for filename, module in modules.items():
        (folder / filename).write_text(module, encoding="utf-8")
    for filename, array, bits, signed in files:
        write_tensor(folder / filename, array, bits=bits, signed=signed)


def render(graph: ir.Graph, *, header: str | None = None) -> tuple[str, list]:
    """(main.sknd text, [(file name, array, bits, signed)]) for `graph`."""
    return _Writer(graph).render(DEFAULT_HEADER if header is None else header)


def _tensor_type(t: ir.Tensor, where: str) -> str:
    if t.dtype in _TYPE_NAMES:
        return _TYPE_NAMES[t.dtype]
    if t.dtype.is_integer:
        return "int"
    raise UnsupportedError(f"{where}: tensor {t.name!r} is {t.dtype}; SkriptND models hold real "
                           "(float32), int and bool tensors",
                           hint="cast the tensor to float32 before writing the model")


def _width_quant(t: ir.Tensor) -> ir.QuantInfo | None:
    """The QuantInfo written for `t`: its own, or one recording an integer width (module doc)."""
    return t.quant if t.quant is not None else width_quant(t.dtype)


def _storage(data: np.ndarray, quant: ir.QuantInfo | None) -> tuple[np.ndarray, int | None, bool | None]:
    """(array, bits, signed) to store integer/bool/float data in a .dat file (module doc)."""
    if data.dtype == np.bool_:
        return data, None, None
    if data.dtype.kind == "f":
        return data.astype(np.float32), None, None
    values = data.astype(np.int64)
    widths = []
    if quant is not None and (int(quant.bits), bool(quant.signed)) in _STORAGE:
        widths.append((int(quant.bits), bool(quant.signed)))
    widths += [(32, True), (64, True)]
    for bits, signed in widths:
        lo = -(1 << (bits - 1)) if signed else 0
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        if values.size == 0 or (values.min() >= lo and values.max() <= hi):
            storage = _STORAGE[(bits, signed)]
            return values.astype(storage), (bits if bits in (4, 48) else None), None
    raise AssertionError("int64 holds every int64 value")


class _Names:
    """Identifiers of the text: unique, never reserved, preferring the tensor's own name."""

    def __init__(self, reserved):
        self.taken: set[str] = set(reserved)

    def fresh(self, wanted: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", wanted) or "t"
        if len(base) > MAX_IDENTIFIER:
            # a data variable's identifier is its file's name (2.15): keep it within the file
            # systems' 255 bytes; the digest keeps two long names that share a prefix apart
            digest = hashlib.sha1(wanted.encode("utf-8")).hexdigest()[:10]
            base = f"{base[:MAX_IDENTIFIER - 11]}_{digest}"
        if base[0].isdigit():
            base = "t_" + base
        if base in RESERVED:
            base += "_"
        name, k = base, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name


class _Writer:
    def __init__(self, graph: ir.Graph):
        self.g = graph
        self.modules = ModuleSet(None)
        self.own: dict[str, dict[str, ast.OperatorDef]] = {}   # module → the model's operators
        self.ref: dict[str, str] = {}          # tensor name → expression referring to it
        self.scoped: dict[str, str] = {}       # tensor name → its name in @quantize (2.14)
        self.tensors = _all_tensors(graph)      # with those of control-flow subgraphs
        self.prefix = ""                        # scope of the block being written (2.10.1)
        plain = {n for n in graph.tensors if is_identifier(n)}
        self.names = _Names(plain)
        self.plain = frozenset(plain)           # the graph's tensors named by identifiers

    # ------------------------------------------------------------ main
    def render(self, header: str) -> tuple[str, list]:
        g = self.g
        where = f"graph {g.name!r}"
        produced = {n for op in g.ops for n in op.outputs}
        # graph inputs, then data tensors in first-use order (then unused ones)
        inputs = []
        for name in g.inputs:
            t = g.tensor(name)
            ident = name if is_identifier(name) else self.names.fresh(name)
            self.ref[name] = self.scoped[name] = ident
            inputs.append(f"{ident}: {self._type(t, where, dynamic='bound')};")
        order = [n for op in _all_ops(g) for n in op.inputs if n] + list(g.outputs) + list(self.tensors)
        variables, files, seen = [], [], set()
        for name in order:
            t = self.tensors.get(name)
            if t is None or name in seen or name in self.ref or t.data is None:
                continue
            seen.add(name)
            if not t.is_static:
                raise InvalidGraphError(f"{where}: data tensor {name!r} has a dynamic shape")
            ident = name if is_identifier(name) and len(name) <= MAX_IDENTIFIER else self.names.fresh(name)
            self.ref[name] = self.scoped[name] = ident
            variables.append(f"{ident}: {self._type(t, where)};")
            array, bits, signed = _storage(np.asarray(t.data), _width_quant(t))
            files.append((ident + ".dat", array, bits, signed))
        for name in g.tensors:
            if name not in self.ref and name not in produced and name in self._used():
                raise InvalidGraphError(f"{where}: tensor {name!r} is read but has no data, is not an "
                                        "input and no op produces it",
                                        hint="give the tensor data or make it a graph input")
        dialects: list[str] = []
        lines = self.statements(g.ops, dialects, where)
        outputs, declared = [], set()
        for name in g.outputs:
            t = g.tensor(name)
            ident = self.ref.get(name)
            if ident is None:
                raise InvalidGraphError(f"{where}: output {name!r} is never produced")
            if not is_identifier(ident) or ident in declared or name in g.inputs or t.data is not None:
                # an input, a variable, a pack item or a repeated output: an alias names it
                alias = self.names.fresh(ident.split("[")[0] + "_out")
                lines.append(f"{alias} = {ident};")
                ident = alias
            declared.add(ident)
            outputs.append(f"{ident}: {self._type(t, where, dynamic='omit')};")
        quant = self._quantize_entries()
        if quant:
            dialects.append("quant")
        return self._text(header, dialects, inputs, outputs, variables, lines, quant), files

    def module_files(self) -> dict[str, str]:
        """{file name: text} of the model's own modules other than main (after render)."""
        return {f"{module}.sknd": module_text(next(iter(defs.values())), module)
                for module, defs in sorted(self.own.items()) if module != "main"}

    def _used(self) -> set[str]:
        return {n for op in self.g.ops for n in op.inputs} | set(self.g.outputs)

    def _text(self, header, dialects, inputs, outputs, variables, lines, quant) -> str:
        out = [f"# {line}".rstrip() for line in header.splitlines()] or []
        imports = sorted(set(dialects))
        out += [f"import {m};" for m in imports]
        gname = self.g.name if is_identifier(self.g.name) else _Names(()).fresh(self.g.name)
        for name, d in sorted(self.own.get("main", {}).items()):
            out += ["", definition_text(d, f"main.{name}")]
        out += ["", f"graph {gname} {{"]
        for block, items in (("@input", inputs), ("@output", outputs), ("@variable", variables),
                             ("@compose", lines), ("@quantize", quant)):
            if items:
                out.append(f"{INDENT}{block} {{")
                out += [f"{INDENT * 2}{item}" for item in items]
                out.append(f"{INDENT}}}")
        out.append("}")
        return "\n".join(out) + "\n"

    def _type(self, t: ir.Tensor, where: str, dynamic: str = "omit") -> str:
        dims = []
        for k, d in enumerate(t.shape):
            if d is not None:
                dims.append(str(int(d)))
            elif dynamic == "bound" and t.max_shape is not None and t.max_shape[k] >= 0:
                dims.append(f"~|{int(t.max_shape[k])}")
            elif dynamic == "bound":
                raise InvalidGraphError(f"{where}: input {t.name!r} has a dynamic extent without an "
                                        "upper bound (2.6.1 needs one for graph inputs)")
            else:
                dims.append("~")
        return f"{_tensor_type(t, where)}[{', '.join(dims)}]"

    # ------------------------------------------------------------ invocations
    def _definition(self, op: ir.Op) -> tuple[str, ast.OperatorDef]:
        module, name = op.kind.dialect, op.kind.short_name
        where = f"{op.kind.name} {op.label!r}"
        if op.definition is not None:          # the model's own operator (writer_own.py)
            known = self.own.setdefault(module, {}).setdefault(name, op.definition)
            if known is not op.definition and known.loc != op.definition.loc:
                raise UnsupportedError(f"{where}: two different definitions of '{op.kind.name}' "
                                       "in one graph cannot be written")
            return module, op.definition
        if not module:
            raise UnsupportedError(f"{where}: operator kind has no module")
        try:
            mod = self.modules.module(module, None)
        except QsimError:
            raise UnsupportedError(f"{where}: '{module}' is not a SkriptND module qsim knows "
                                   "(standard modules, tosa, cvm)") from None
        definition = mod.get(name)
        if definition is None or definition.is_graph:
            raise UnsupportedError(f"{where}: module '{module}' has no operator '{name}'")
        return module, definition

    def statements(self, ops, dialects: list, where: str) -> list[str]:
        return [write_control(self, op, dialects) if op.subgraphs else self._invocation(op, dialects, where)
                for op in ops]

    def bind_target(self, name: str) -> str:
        """The identifier written as the target producing tensor `name` in the current block: the
        name without the block's scope when that is an identifier (so it reads back the same),
        else a fresh identifier (the name changes once)."""
        rest = name[len(self.prefix):] if name.startswith(self.prefix) else None
        ident = rest if rest is not None and is_identifier(rest) and (
            not self.prefix or rest not in self.names.taken) else self.names.fresh(rest or name)
        self.names.taken.add(ident)
        self.ref[name] = ident
        if not self.prefix:
            self.scoped[name] = ident
        return ident

    def _invocation(self, op: ir.Op, dialects: list, where: str) -> str:
        module, d = self._definition(op)
        main_own = module == "main" and op.definition is not None
        if module not in dialects and not main_own:
            dialects.append(module)
        opwhere = f"{op.kind.name} {op.label!r}"
        args = self._args(op, d, opwhere)
        attrs = self._attrs(op, d, opwhere)
        generics = self._generics(op, d)
        callee = op.kind.short_name if main_own else op.kind.name
        call = f"{callee}{generics}{attrs}({', '.join(args)})"
        return self._bind_outputs(op, d, call, opwhere)

    def _args(self, op: ir.Op, d: ast.OperatorDef, where: str) -> list[str]:
        names = list(op.inputs)
        while names and names[-1] == "":
            names.pop()
        packed = [decl.type.pack is not None for decl in d.inputs]
        refs = []
        for n in names:
            if n == "":
                refs.append("~")
            elif n not in self.ref:
                raise InvalidGraphError(f"{where} reads {n!r} before it is produced",
                                        hint="ops must be listed in execution order")
            else:
                refs.append(self.ref[n])
        if any(packed):
            if len(d.inputs) != 1:
                raise UnsupportedError(f"{where}: a packed input beside other inputs cannot be written")
            return ["[" + ", ".join(refs) + "]"]
        if len(refs) > len(d.inputs):
            raise InvalidGraphError(f"{where}: {len(refs)} inputs, '{op.kind.name}' takes {len(d.inputs)}")
        return refs

    def _attrs(self, op: ir.Op, d: ast.OperatorDef, where: str) -> str:
        declared = {a.name: a for a in d.attribs}
        for name, value in op.attrs.items():
            if isinstance(value, np.ndarray):
                format_value(value, f"{where}: attribute {name!r}")     # raises, naming the fix
            if name not in declared:
                raise InvalidGraphError(f"{where}: attribute {name!r} is not declared by '{op.kind.name}' "
                                        f"(attributes: {', '.join(declared) or 'none'})")
        items = []
        for decl in d.attribs:
            if decl.name not in op.attrs:
                continue
            value = op.attrs[decl.name]
            default = _constant_default(decl)
            if value is None:
                if decl.default is None or default is _NULL:
                    continue
                raise UnsupportedError(f"{where}: attribute {decl.name!r} is null but its default is not; "
                                       "SkriptND has no null literal")
            if default is not _UNKNOWN and _equal(value, default):
                continue
            items.append(f"{decl.name} = {format_value(value, f'{where}: attribute {decl.name!r}')}")
        return "{" + ", ".join(items) + "}" if items else ""

    def _generics(self, op: ir.Op, d: ast.OperatorDef) -> str:
        """`<T, ...>` when a generic type is not determined by the written inputs/attributes."""
        if not d.dtypes:
            return ""
        given = [n for n in op.inputs]
        bound = []
        for k, decl in enumerate(d.inputs):
            if decl.type.base in {t.name for t in d.dtypes}:
                if decl.type.pack is not None:
                    present = any(given)
                else:
                    present = k < len(given) and given[k] != ""
                if present:
                    bound.append(decl.type.base)
        for decl in d.attribs:
            v = op.attrs.get(decl.name)
            if v is not None and not (isinstance(v, tuple) and len(v) == 0):
                bound.append(decl.type.base)
        if all(t.name in bound for t in d.dtypes):
            return ""
        names = []
        for t in d.dtypes:
            names.append(self._generic_value(op, d, t))
        return "<" + ", ".join(names) + ">"

    def _generic_value(self, op: ir.Op, d: ast.OperatorDef, t: ast.DtypeDecl) -> str:
        k = 0
        for decl in d.outputs:
            if decl.type.base == t.name and k < len(op.outputs):
                return _tensor_type(self.tensors[op.outputs[k]], f"{op.kind.name} {op.label!r}")
            k += 1
        for k, decl in enumerate(d.inputs):
            if decl.type.base == t.name and k < len(op.inputs) and op.inputs[k]:
                return _tensor_type(self.tensors[op.inputs[k]], f"{op.kind.name} {op.label!r}")
        return t.default or "real"

    def _bind_outputs(self, op: ir.Op, d: ast.OperatorDef, call: str, where: str) -> str:
        outs = list(op.outputs)
        packed = [decl.type.pack is not None for decl in d.outputs]
        if any(packed):
            return self._bind_pack(op, d, call, where, packed)
        if len(outs) != len(d.outputs):
            raise InvalidGraphError(f"{where}: {len(outs)} outputs, '{op.kind.name}' declares "
                                    f"{len(d.outputs)}")
        p = self.prefix
        scope = _common_scope([n[len(p):] if n.startswith(p) else None for n in outs])
        if scope is not None and any(n[len(p) + len(scope) + 1:] in self.plain for n in outs):
            scope = None    # a block's local name would redefine a graph tensor (input 'ids', 'te.ids')
        if scope is None:
            targets = [self.bind_target(n) for n in outs]
            return f"{', '.join(targets)} = {self._label(op, p, targets[0])}{call};"
        # labelled blocks give the outputs their scoped names (a label scopes the names of what
        # its block defines, 2.10): `conv1_acc = conv1: { acc = op(...); yield acc; };`
        inner = [n[len(p) + len(scope) + 1:] for n in outs]
        outer = []
        for n in outs:
            ident = self.names.fresh(n)
            self.ref[n] = ident
            if not p:
                self.scoped[n] = n
            outer.append(ident)
        names = ", ".join(inner)
        parts = scope.split(".")
        text = f"{names} = {self._label(op, p + scope + '.', inner[0])}{call}; yield {names};"
        for part in reversed(parts[1:]):
            text = f"{names} = {part}: {{ {text} }}; yield {names};"
        return f"{', '.join(outer)} = {parts[0]}: {{ {text} }};"

    def _bind_pack(self, op, d, call, where, packed) -> str:
        """An operator with a packed output (layout.split, layout.unstack): its only output; the
        composer names the items `<target>_<j>` (compose/composer.py), referenced here as `target[j]`."""
        if len(d.outputs) != 1:
            raise UnsupportedError(f"{where}: a packed output beside other outputs cannot be written")
        local = self.bind_pack(list(op.outputs))
        return f"{local} = {self._label(op, self.prefix, local)}{call};"

    def bind_pack(self, names: list[str]) -> str:
        """The target of a packed result whose items are `names`; the composer names the items
        `<target>_<j>` (compose/composer.py), referenced here as `target[j]`."""
        p = self.prefix
        base = _pack_base(list(names))
        rest = base[len(p):] if base is not None and base.startswith(p) else None
        local = rest if rest is not None and is_identifier(rest) and (
            not p or rest not in self.names.taken) else self.names.fresh(
            names[0].rsplit("_", 1)[0] if names else "outputs")
        self.names.taken.add(local)
        for j, n in enumerate(names):
            self.ref[n] = f"{local}[{j}]"
        return local

    @staticmethod
    def _label(op: ir.Op, prefix: str, first_target: str) -> str:
        """`label: ` when the op's name differs from what the composer would give it (the first
        target, within the enclosing block scope); a name that is no identifier is dropped."""
        if op.name == prefix + first_target or not op.name.startswith(prefix):
            return ""
        rest = op.name[len(prefix):]
        return f"{rest}: " if is_identifier(rest) else ""

    # ------------------------------------------------------------ @quantize
    def _quantize_entries(self) -> list[str]:
        entries = []
        # in the order the text defines the tensors (inputs, variables, op outputs), which the
        # reloaded graph keeps, so a second write lists them alike
        for name in list(self.scoped) + [n for n in self.ref if n not in self.scoped]:
            t = self.tensors[name]
            q = _width_quant(t)
            if q is None:
                continue
            if name not in self.g.tensors:
                raise UnsupportedError(f"tensor {name!r} of a control-flow body has a QuantInfo; "
                                       "@quantize entries reach the graph's own tensors only")
            if name not in self.scoped:
                raise UnsupportedError(f"tensor {name!r}: an item of a packed output cannot carry a "
                                       "@quantize entry (it has no scoped name, 2.14)")
            entries.append(f"{self.scoped[name]}: {quant_entry(q, t)};")
        return entries


def _all_ops(g: ir.Graph):
    for op in g.ops:
        yield op
        for sub in op.subgraphs.values():
            yield from _all_ops(sub)


def _all_tensors(g: ir.Graph) -> dict[str, ir.Tensor]:
    """The tensors of `g` and of its control-flow subgraphs (names are unique along the chain)."""
    out = dict(g.tensors)
    for op in _all_ops(g):
        for sub in op.subgraphs.values():
            for name, t in sub.tensors.items():
                out.setdefault(name, t)
    return out


def _common_scope(names: list[str | None]) -> str | None:
    """'a.b' when every name is 'a.b.<identifier>' (all parts identifiers), else None."""
    scopes = set()
    for n in names:
        if n is None or "." not in n:
            return None
        parts = n.split(".")
        if not all(is_identifier(p) for p in parts):
            return None
        scopes.add(".".join(parts[:-1]))
    return scopes.pop() if len(scopes) == 1 else None


def _pack_base(names: list[str]) -> str | None:
    """'x' when the names are x_0, x_1, ... (how the composer names a packed output, compose/composer.py)."""
    if not names:
        return None
    base = names[0].rsplit("_", 1)[0]
    if all(n == f"{base}_{j}" for j, n in enumerate(names)):
        return base
    return None


_UNKNOWN = object()
_NULL = object()


def _constant_default(decl: ast.ParamDecl):
    """The default of an attribute when it is a constant expression, else _UNKNOWN."""
    if decl.default is None:
        return _NULL if decl.type.optional else _UNKNOWN
    if free_names(decl.default):
        return _UNKNOWN
    try:
        value = Evaluator({}, "default").eval(decl.default)
    except QsimError:
        return _UNKNOWN
    return _NULL if value is None else value


def _equal(value, default) -> bool:
    if isinstance(default, Uniform) or isinstance(value, (tuple, list)) != isinstance(default, tuple):
        return False
    if isinstance(value, list):
        value = tuple(value)
    if isinstance(value, float) and isinstance(default, float) and value == default:
        return math.copysign(1, value) == math.copysign(1, default)
    return same(value, default)
