"""The tensors a definition declares, for the composer (NNEF 2.0 draft 2.6, 2.6.1, 2.7, 3):
the main graph's inputs (packed, of run-time length, with dynamic extents) and outputs as
declared, and the @constant and @variable tensors of a graph or an invoked operator.
`Composer` (composer.py) inherits these.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import QsimError, SemanticError, UnsupportedError
from ...limits import check_tensor_size
from .. import ast
from ..evaluate import Evaluator, free_names
from .instance import check_extent, check_rank, eval_shape, resolve_type
from . import dynattr, dynpack
from .dynpack import DynPack
from .composed_graph import NUMPY, ComposedGraphBuilder, Frame, tensor_data
from ..values import Dyn, TensorValue, error, is_pack, show, type_of


class DeclaredTensors:
    """Graph inputs and outputs as declared, and the local tensors of a body."""

    def _packed_graph_input(self, decl, env, where, b: ComposedGraphBuilder):
        """A packed graph input `xs: real[..]..(n)`: n graph inputs `xs_0 .. xs_{n-1}` when n is a
        compile-time count; with a new symbol and an upper bound, `..(s|5)`, a pack of run-time
        length held as one tensor of its items stacked along a leading extent s (dynpack.py)."""
        pack = decl.type.pack
        if pack.length is None:
            raise error(f"{where}: packed input '{decl.name}' of the main graph needs a length, as in "
                        "..(3) or ..(s|5)", pack.loc)
        dtype = resolve_type(decl.type.base, env, decl.loc, where)
        if isinstance(pack.length, ast.Name) and pack.length.name not in env:
            if pack.bound is None:
                raise error(f"{where}: the run-time length '{pack.length.name}' of packed input "
                            f"'{decl.name}' needs an upper bound, as in ..({pack.length.name}|5) (2.6.1)",
                            pack.loc)
            bound = Evaluator(env, where).eval(pack.bound)
            if type_of(bound) != "int" or isinstance(bound, Dyn) or bound < 0:
                raise error(f"{where}: the upper bound of a pack length must be a compile-time int >= 0, "
                            f"got {show(bound)}", pack.bound.loc)
            count = Dyn(pack.length.name, 0, bound)
            env[pack.length.name] = count
            item_shape = self._graph_input_shape(decl, env, where)
            tv = b.tensor(decl.name, dtype, (count,) + item_shape, loc=decl.loc)
            dynattr.record_symbols(b.symbols, tv.name, tv.shape)
            b.accessible[decl.name] = tv.name
            return DynPack(tv, count)
        count = Evaluator(env, where).eval(pack.length)
        if type_of(count) != "int" or isinstance(count, Dyn) or count < 0:
            raise error(f"{where}: the length of packed input '{decl.name}' must be a compile-time int >= 0 "
                        f"or a new symbol with an upper bound, got {show(count)}", pack.length.loc)
        if pack.bound is not None:
            bound = Evaluator(env, where).eval(pack.bound)
            if not isinstance(bound, int) or count > bound:
                raise error(f"{where}: packed input '{decl.name}' has length {count} above its upper bound "
                            f"{show(bound)}", pack.bound.loc)
        items = []
        for k in range(count):
            shape = self._graph_input_shape(decl, env, where)
            tv = b.tensor(f"{decl.name}_{k}", dtype, shape, loc=decl.loc)
            dynattr.record_symbols(b.symbols, tv.name, tv.shape)
            b.accessible[f"{decl.name}_{k}"] = tv.name
            items.append(tv)
        return tuple(items)

    def _packed_graph_output(self, decl, value, env, where) -> list:
        """Names of the tensors of a packed graph output: its items, or the stacked tensor of a pack
        of run-time length (dynpack.py), checked against the declared length and item shape."""
        length = decl.type.pack.length
        n = None
        if length is not None and free_names(length) <= env.keys():
            n = Evaluator(env, where).eval(length)
        item = ast.ParamDecl(decl.loc, decl.name, dataclasses.replace(decl.type, pack=None))
        if isinstance(value, DynPack):
            dynpack.check_length(value, n, f"{where}: output '{decl.name}'", decl.loc)
            self._check_declared(item, TensorValue(value.tensor.name, value.dtype, value.item_shape), env, where)
            return [value.tensor.name]
        if n is not None and not isinstance(n, Dyn) and n != len(value):
            raise error(f"{where}: output '{decl.name}' is declared with {show(n)} items but the composition "
                        f"gives {len(value)}", decl.loc)
        for tv in value:
            if not isinstance(tv, TensorValue):
                raise error(f"{where}: output '{decl.name}' holds {show(tv)}, not a tensor", decl.loc)
            self._check_declared(item, tv, env, where)
        return [tv.name for tv in value]

    def _graph_input_shape(self, decl, env, where):
        t = decl.type
        if t.shape is None:
            raise error(f"{where}: input '{decl.name}' of the main graph needs a shape (with upper bounds "
                        "where it is dynamic)", decl.loc)
        shape: list = []
        ev = Evaluator(env, where)
        for item in t.shape:
            bound = ev.eval(item.bound) if item.bound is not None else None
            if bound is not None:
                check_extent(bound, decl.name, where, item.bound.loc, "upper bound")
            n = 1
            if item.pack is not None:
                if item.pack.length is None:
                    raise error(f"{where}: the rank of input '{decl.name}' must be given", item.loc)
                n = ev.eval(item.pack.length)
                check_rank(n, decl.name, where, item.pack.length.loc)
            if isinstance(item.extent, ast.Omitted) or (isinstance(item.extent, ast.Name)
                                                        and item.extent.name not in env):
                if bound is None and isinstance(item.extent, ast.Omitted):
                    raise error(f"{where}: dynamic extent of main graph input '{decl.name}' needs an upper "
                                "bound, as in ~|10 (2.6.1)", item.loc)
                if isinstance(item.extent, ast.Name):
                    sym = item.extent.name
                    if n != 1:
                        env[sym] = tuple(Dyn(f"{sym}[{j}]", 0, bound) for j in range(n))
                    else:
                        env[sym] = Dyn(sym, 0, bound)
                    shape.extend(env[sym] if n != 1 else (env[sym],))
                else:
                    shape.extend(Dyn(f"{decl.name}.{len(shape) + j}", 0, bound) for j in range(n))
                continue
            value = ev.eval(item.extent)
            if value is None:
                continue
            for d in (value if is_pack(value) else (value,)):
                check_extent(d, decl.name, where, item.loc)
            shape.extend(value if is_pack(value) else (value,))
        for d in shape:
            if isinstance(d, Dyn) and d.hi is None:
                raise error(f"{where}: dynamic extent of main graph input '{decl.name}' needs an upper bound",
                            decl.loc)
        return tuple(shape)

    # ================================================================ local tensors
    def _locals(self, frame: Frame, b: ComposedGraphBuilder):
        """@constant and @variable tensors of a graph or an invoked operator (2.7)."""
        for decl in frame.op.constants:
            dtype = resolve_type(decl.type.base, frame.env, decl.loc, frame.where)
            values = self._constant_values(decl, dtype, frame)
            tvs = tuple(b.tensor(frame.scope + decl.name + (f"_{k}" if len(values) > 1 else ""), dtype,
                                 shape, data, decl.loc) for k, (shape, data) in enumerate(values))
            frame.env[decl.name] = tvs if decl.type.pack is not None else tvs[0]
            b.accessible[frame.scope + decl.name] = tvs[0].name
        for decl in frame.op.variables:
            dtype = resolve_type(decl.type.base, frame.env, decl.loc, frame.where)
            if decl.default is not None:
                raise error(f"{frame.where}: variable '{decl.name}' cannot have a value; variables are "
                            "loaded from data files (2.7)", decl.default.loc)
            if decl.type.pack is not None:
                raise UnsupportedError(f"{frame.where}: packed variables are not supported", location=decl.loc)
            shape, _ = eval_shape(decl.type, frame.env, frame.where, decl)
            if any(isinstance(d, Dyn) for d in shape):
                raise error(f"{frame.where}: variable '{decl.name}' must have a static shape", decl.loc)
            scoped = frame.scope + decl.name
            probe = TensorValue(scoped, dtype, shape)
            data = self.options.load_variable(scoped, probe) if self.options.load_variable else None
            if data is None:
                b.missing_data.append(scoped)
            else:
                data = np.asarray(data)
                if tuple(data.shape) != tuple(shape):
                    raise SemanticError(f"variable '{scoped}' is declared {dtype}{list(shape)} but its data "
                                        f"has shape {list(data.shape)}", location=decl.loc)
                data = data.astype(NUMPY[dtype], copy=False)
            tv = b.tensor(scoped, dtype, shape, data, decl.loc)
            frame.env[decl.name] = tv
            b.accessible[scoped] = tv.name

    def _constant_values(self, decl: ast.ParamDecl, dtype: str, frame: Frame) -> list:
        if decl.default is None:
            raise error(f"{frame.where}: constant '{decl.name}' needs a value after '='", decl.loc)
        env = frame.env
        count = None
        if decl.type.pack is not None:
            count = Evaluator(env, frame.where).eval(decl.type.pack.length) if decl.type.pack.length else None
            value = Evaluator(env, frame.where).eval(decl.default)
            if not is_pack(value) or (count is not None and len(value) != count):
                raise error(f"{frame.where}: a pack of constants needs a list of {show(count)} values", decl.loc)
            out = []
            for k, v in enumerate(value):
                shape, _ = eval_shape(decl.type, env, frame.where, decl, k)
                _check_constant_size(decl, shape, dtype)
                out.append((shape, np.full(shape, tensor_data(v, dtype, f"constant '{decl.name}'", decl.loc),
                                            dtype=NUMPY[dtype])))
            return out
        shape, _ = eval_shape(decl.type, env, frame.where, decl)
        _check_constant_size(decl, shape, dtype)
        if decl.bounds:
            limits = []
            for bnd in decl.bounds:
                limits.append(Evaluator(env, frame.where).eval(bnd.limit))
            if tuple(limits) != tuple(shape):
                raise error(f"{frame.where}: index bounds {show(tuple(limits))} of constant '{decl.name}' do not "
                            f"match its shape {show(tuple(shape))}", decl.loc)
            grid = np.indices(shape, dtype=np.int64) if shape else []
            local = dict(env)
            for bnd, g in zip(decl.bounds, grid):
                local[bnd.index] = g
            value = Evaluator(local, frame.where).eval(decl.default)
        else:
            value = Evaluator(env, frame.where).eval(decl.default)
        if value is None:
            raise error(f"{frame.where}: constant '{decl.name}' evaluates to null", decl.loc)
        vtype = type_of(value)
        if vtype != dtype and not (dtype == "real" and vtype == "int"):
            raise error(f"{frame.where}: constant '{decl.name}' is {dtype} but its value is {vtype}", decl.loc)
        if is_pack(value):
            volume = int(np.prod(shape, dtype=np.int64))
            if len(value) != volume:
                raise error(f"{frame.where}: constant '{decl.name}' has {len(value)} values for {volume} "
                            "elements (a flat, row-major list)", decl.loc)
            data = tensor_data(value, dtype, f"constant '{decl.name}'", decl.loc).reshape(shape)
        else:
            data = np.broadcast_to(tensor_data(value, dtype, f"constant '{decl.name}'", decl.loc),
                                   shape).copy()
        return [(shape, data)]

    def _check_declared(self, decl, value: TensorValue, env, where):
        t = decl.type
        dtype = resolve_type(t.base, env, decl.loc, where)
        if dtype is not None and dtype != value.dtype:
            raise error(f"{where}: output '{decl.name}' is declared {dtype} but composed as {value.dtype}",
                        decl.loc)
        if t.shape is None or any(isinstance(i.extent, ast.Omitted) for i in t.shape):
            return
        try:
            shape, _ = eval_shape(t, dict(env), where, decl)
        except QsimError:
            return
        if len(shape) != len(value.shape) or any(
                not isinstance(a, Dyn) and not isinstance(b2, Dyn) and a != b2 for a, b2 in zip(shape, value.shape)):
            raise error(f"{where}: output '{decl.name}' is declared with shape {show(shape)} but the composition "
                        f"gives {show(tuple(value.shape))}", decl.loc)


def _check_constant_size(decl: ast.ParamDecl, shape: tuple, dtype: str) -> None:
    """Before a @constant is materialised: its data, and for a per-element initializer the
    index grids (one int64 array per axis), must fit the tensor limit."""
    if any(isinstance(d, Dyn) for d in shape):
        raise error(f"constant '{decl.name}' must have a static shape", decl.loc)
    check_tensor_size(shape, NUMPY[dtype]().itemsize, f"constant '{decl.name}'", decl.loc)
    if decl.bounds:
        check_tensor_size((len(shape),) + tuple(shape), 8,
                          f"index grid of constant '{decl.name}'", decl.loc)


