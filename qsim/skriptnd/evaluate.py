"""The one evaluator of SkriptND expressions (NNEF 2.0 draft 2.4, 2.4.1), for composition and for
the @lower interpreter alike.

`Evaluator(env).eval(expr)` computes an expression's value from the symbols in `env` (see
values.py for the value model). Null propagates through every form except `??` and `?x`; packs
act element-wise; folds, ranges, zips, substitution, masking, casts, built-ins and formatted
strings follow 2.4, with the operators' type rules of operators.py. Errors are SemanticError
located at the offending sub-expression.

The two uses differ only in what a name can stand for, which is the `lowering` parameter:
- composing (no `lowering`): compile-time values, tensors as shapes (`TensorValue`), run-time
  extents (`Dyn`), which flow through arithmetic with interval bounds; comparisons involving
  them are undecidable at compile time and yield a bool `Dyn`, which assertions skip (2.6.1:
  such checks happen at run time);
- a @lower formula (`lowering=Lowering(...)`, lower/access.py): tensors are data (numpy
  arrays), index symbols broadcast grids, generic type names the invocation's; tensor access
  and guarded indices are the lowering's. Arithmetic on run-time data follows the IEEE and
  integer rules of the data (a real division by zero is inf, `sqrt` of a negative value NaN)
  where a compile-time value would be refused.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from . import ast
from .compose.dynpack import DynPack
from .operators import binary_scalar, builtin, cast, elementwise, fold, key_of, no_tensors, pairwise
from .semantics import REAL_FUNCTIONS
from .values import DEFAULTS, Dyn, TensorValue, TypeValue, Uniform, error, is_pack, same, show, type_of


class Evaluator:
    """Evaluates expressions against `env` (name → value). `where` names the context in errors;
    `lowering` makes it the evaluator of a @lower formula (see the module docstring)."""

    def __init__(self, env: Mapping[str, Any], where: str = "", lowering=None):
        self.env = env
        self.where = where
        self.lowering = lowering

    @property
    def runtime(self) -> bool:
        """Arrays are run-time data (a @lower formula), not compile-time index grids."""
        return self.lowering is not None

    # ------------------------------------------------------------------ entry points
    def eval(self, e: ast.Expr) -> Any:
        method = _DISPATCH.get(type(e))
        if method is None:
            raise self.fail(f"{type(e).__name__} expressions are not allowed here", e)
        return method(self, e)

    def fail(self, message: str, e: ast.Node, hint: str | None = None):
        where = f" ({self.where})" if self.where else ""
        return error(message + where, e.loc, hint)

    # ------------------------------------------------------------------ leaves
    def _literal(self, e):
        return e.value

    def _string(self, e: ast.StrLit):
        out = []
        for part in e.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.append(show(self.eval(part)))
        return "".join(out)

    def _name(self, e: ast.Name):
        try:
            return self.env[e.name]
        except KeyError:
            raise self.fail(f"unknown identifier '{e.name}'", e) from None

    def _member(self, e: ast.Member):
        if not isinstance(e.target, ast.Name):
            raise self.fail("only '.shape', '.rank' and '.size' of a tensor name are allowed", e)
        target = self.eval(e.target)
        if e.member in ("shape", "rank"):
            if isinstance(target, TensorValue):
                return tuple(target.shape) if e.member == "shape" else target.rank
            if self.runtime and isinstance(target, np.ndarray):
                return tuple(int(d) for d in target.shape) if e.member == "shape" else target.ndim
            if target is None:
                return None
            raise self.fail(f"'{e.target.name}.{e.member}' needs '{e.target.name}' to be a (non-packed) "
                            "tensor", e)
        if e.member == "size":
            if isinstance(target, tuple) or (self.runtime and isinstance(target, list)):
                return len(target)
            if isinstance(target, DynPack):
                return target.count          # a pack of run-time length (compose/dynpack.py)
            if target is None:
                return None
            raise self.fail(f"'{e.target.name}.size' needs '{e.target.name}' to be a pack", e)
        raise self.fail(f"'{e.target.name}.{e.member}': scoped names cannot be used in expressions "
                        "(2.10); only .shape, .rank and .size are defined", e)

    # ------------------------------------------------------------------ lists and packs
    def _list(self, e: ast.ListExpr):
        items: list = []
        uniform_parts = []
        for item in e.items:
            if isinstance(item, ast.Expand):
                value = self.expand_item(item)
                if value is None:
                    return None
                items.extend(value)
                uniform_parts.append(value)
            elif isinstance(item, ast.Range):
                value = self._range(item)
                if value is None:
                    return None
                items.extend(value)
                uniform_parts.append(value)
            else:
                value = self.eval(item)
                if value is None:
                    return None
                if is_pack(value):
                    raise self.fail("a pack inside a list must be expanded with '..' (lists do not nest)",
                                    item, hint="write [..., x.., ...]")
                items.append(value)
                uniform_parts.append(None)
        if len(uniform_parts) == 1 and isinstance(uniform_parts[0], Uniform):
            return uniform_parts[0]
        return tuple(items)

    def expand_item(self, item: ast.Expand):
        if isinstance(item.operand, ast.Tuple):       # zip [(a, b)..]
            packs = [self.eval(p) for p in item.operand.items]
            if any(p is None for p in packs):
                return None
            for p, node in zip(packs, item.operand.items):
                if not is_pack(p):
                    raise self.fail("zip items must be packs", node)
            n = len(packs[0])
            if any(len(p) != n for p in packs):
                raise self.fail(f"zipped packs have different lengths {[len(p) for p in packs]}", item)
            out = tuple(p[i] for i in range(n) for p in packs)
            return self._check_count(item, out)
        value = self.eval(item.operand)
        if value is None:
            return None
        if is_pack(value):
            return self._check_count(item, value)
        if item.count is None:
            raise self.fail("expanding a non-packed value needs a repeat count, as in 'x..(n)'", item)
        count = self.eval(item.count)
        if count is None:
            return None
        if isinstance(count, (bool, np.bool_)):
            count = int(count)
        if type_of(count) != "int" or isinstance(count, Dyn):
            raise self.fail(f"repeat count must be a compile-time int or bool, got {show(count)}", item.count)
        if count < 0:
            raise self.fail(f"repeat count is negative ({count})", item.count)
        self._check_pack_length(int(count), item.count)
        return Uniform(value, int(count))

    def _check_pack_length(self, n: int, node) -> None:
        if n > MAX_PACK_LENGTH:
            raise self.fail(f"the pack would have {n} items, more than qsim builds at compile time "
                            f"({MAX_PACK_LENGTH})", node,
                            hint="pass large data as a tensor (@variable with a .dat file) instead")

    def _check_count(self, item: ast.Expand, value: tuple):
        if item.count is not None:
            n = self.eval(item.count)
            if n is not None and not isinstance(n, Dyn) and n != len(value):
                raise self.fail(f"pack length is {len(value)} but {show(n)} was written after '..'", item.count)
        return value

    def _range(self, r: ast.Range):
        if r.begin is None or r.end is None:
            raise self.fail("a range in a list needs a begin and an end, as in [b:e] or [b:e:s]", r)
        b, en = self.eval(r.begin), self.eval(r.end)
        s = self.eval(r.step) if r.step is not None else 1
        if b is None or en is None or s is None:
            return None
        for v, node in ((b, r.begin), (en, r.end), (s, r.step or r)):
            if type_of(v) != "int" or isinstance(v, Dyn) or is_pack(v):
                raise self.fail(f"range bounds and stride must be compile-time ints, got {show(v)}", node)
        if s == 0:
            raise self.fail("range stride is zero", r.step or r)
        b, en, s = int(b), int(en), int(s)
        # the length in Python ints (len(range) overflows past 2**63)
        self._check_pack_length(max(0, -((b - en) // s) if s > 0 else -((en - b) // -s)), r)
        return tuple(range(b, en, s))

    def _tuple(self, e: ast.Tuple):
        raise self.fail("a parenthesised tuple is only allowed as a zip '[(a, b)..]'", e)

    def _expand(self, e: ast.Expand):
        raise self.fail("'..' expansion is only allowed in lists, indices and arguments", e)

    # ------------------------------------------------------------------ indexing
    def _subscript(self, e: ast.Subscript):
        target = self.eval(e.target)
        if target is None:
            return None
        if self.runtime and isinstance(target, (np.ndarray, list)):
            return self.lowering.subscript(self, e, target)
        if not (is_pack(target) or isinstance(target, str)):
            raise self.fail(f"only packs and strings can be indexed; '{_text(e.target)}' is {show(target)}",
                            e, hint="tensor elements are accessed as x[i,] in @lower only")
        if isinstance(e.index, ast.Range):
            return self._slice(target, e.index)
        index = self.eval(e.index)
        if index is None:
            return None
        return self._pick(target, index, e)

    def _pick(self, target, index, e):
        n = len(target)
        if is_pack(index):
            if index and type_of(index) == "bool":
                if len(index) != n:
                    raise self.fail(f"mask has {len(index)} items, the pack has {n}", e)
                items = tuple(t for t, m in zip(target, index) if m)
            else:
                items = tuple(self._pick(target, i, e) for i in index)
            return "".join(items) if isinstance(target, str) else items
        if isinstance(index, np.ndarray) and index.dtype.kind in "iu" and not isinstance(target, str):
            # a per-element constant initializer indexes with its index grids (2.7)
            if index.size and not (-n <= index.min() and index.max() < n):
                raise self.fail(f"index {int(index.min() if index.min() < -n else index.max())} is "
                                f"out of range for a pack of length {n}", e)
            if any(isinstance(t, (np.ndarray, Dyn, TensorValue)) or is_pack(t) for t in target):
                raise self.fail("only a pack of numbers or bools can be indexed per element", e)
            items = np.asarray(target)
            if items.dtype == object:
                raise self.fail("only a pack of numbers or bools can be indexed per element", e)
            return items[index]
        if isinstance(index, Dyn) or type_of(index) != "int":
            raise self.fail(f"index must be a compile-time int, int.. or bool..; got {show(index)}", e)
        i = int(index)
        if not -n <= i < n:
            raise self.fail(f"index {i} is out of range for a pack of length {n}", e)
        return target[i]

    def _slice(self, target, r: ast.Range):
        parts = []
        for node in (r.begin, r.end, r.step):
            v = self.eval(node) if node is not None else None
            if node is not None and v is None:
                return None
            if v is not None and (type_of(v) != "int" or isinstance(v, (Dyn, np.ndarray)) or is_pack(v)):
                raise self.fail(f"slice bounds must be compile-time ints, got {show(v)}", node)
            parts.append(int(v) if v is not None else None)
        if parts[2] == 0:
            raise self.fail("slice step is zero", r.step)
        return target[slice(*parts)]

    def _substitute(self, e: ast.Substitute):
        target, index, value = self.eval(e.target), self.eval(e.index), self.eval(e.value)
        if target is None or index is None or value is None:
            return None
        if not is_pack(target):
            raise self.fail("substitution '<-' needs a pack on the left", e.target)
        items = list(target)
        n = len(items)
        indices = index if is_pack(index) else (index,)
        values = value if is_pack(index) else (value,)
        if is_pack(index) and not is_pack(value):
            values = (value,) * len(indices)
        if len(values) != len(indices):
            raise self.fail(f"substitution replaces {len(indices)} items with {len(values)} values", e)
        for i, v in zip(indices, values):
            if type_of(i) != "int" or isinstance(i, Dyn):
                raise self.fail(f"substitution index must be a compile-time int, got {show(i)}", e.index)
            if not -n <= i < n:
                raise self.fail(f"substitution index {i} is out of range for a pack of length {n}", e.index)
            items[int(i)] = v
        return tuple(items)

    # ------------------------------------------------------------------ operators
    def _unary(self, e: ast.Unary):
        value = self.eval(e.operand)
        if e.op == "?":
            return value is not None
        if value is None:
            return None
        return elementwise(lambda v: self._unary_scalar(e, v), value)

    def _unary_scalar(self, e, v):
        no_tensors("!" if e.op == "!" else "neg", (v,), e, self)
        t = type_of(v)
        if e.op == "!":
            if t != "bool":
                raise self.fail(f"'!' needs a bool, got {t}", e)
            if isinstance(v, Dyn):
                return Dyn(f"!{v.key}", kind="bool")
            return np.logical_not(v) if isinstance(v, np.ndarray) else (not v)
        if t not in ("int", "real"):
            raise self.fail(f"unary '{e.op}' needs an int or real, got {t}", e)
        if isinstance(v, Dyn):
            if e.op == "+":
                return v
            return Dyn(f"-{v.key}", -v.hi if v.hi is not None else None, -v.lo if v.lo is not None else None)
        return -v if e.op == "-" else v

    def _binary(self, e: ast.Binary):
        op = e.op
        left = self.eval(e.left)
        # short-circuit for non-packed bool operands, so guarded checks such as
        # `v != 0 => x % v == 0` do not evaluate the guarded side
        if op in ("&&", "||", "=>") and isinstance(left, (bool, np.bool_)):
            if (op == "&&" and not left) or (op == "=>" and not left):
                return op == "=>"
            if op == "||" and left:
                return True
        right = self.eval(e.right)
        if left is None or right is None:
            return None
        if op == "in":
            if not is_pack(right):
                raise self.fail("the right side of 'in' must be a pack", e.right)
            return elementwise(lambda v: any(same(v, r) for r in right), left)
        if op == "is":
            return pairwise(lambda a, b: same(a, b), left, right, lambda: self.fail(
                f"'is' on packs of different lengths ({_len(left)} and {_len(right)})", e))
        return pairwise(lambda a, b: binary_scalar(op, a, b, e, self), left, right, lambda: self.fail(
            f"'{op}' on packs of different lengths ({_len(left)} and {_len(right)})", e))

    def _select(self, e: ast.Select):
        cond = self.eval(e.cond)
        if cond is None:
            return None
        if is_pack(cond):
            then = self.eval(e.then)
            other = self.eval(e.otherwise) if e.otherwise is not None else None
            if then is None or (e.otherwise is not None and other is None):
                return None
            n = len(cond)
            for v, node in ((then, e.then), (other, e.otherwise)):
                if is_pack(v) and len(v) != n:
                    raise self.fail(f"select branches must match the condition's length {n}", node)
            pick = lambda v, i: v[i] if is_pack(v) else v     # noqa: E731
            return tuple(pick(then, i) if c else pick(other, i) for i, c in enumerate(cond))
        if isinstance(cond, np.ndarray):
            if cond.dtype.kind != "b":
                raise self.fail(f"select condition must be bool, got {type_of(cond)}", e.cond)
            then = self.eval(e.then)
            other = self.eval(e.otherwise) if e.otherwise is not None else None
            if e.otherwise is None:
                raise self.fail("element-wise select needs both branches", e)
            for v, node in ((then, e.then), (other, e.otherwise)):
                if is_pack(v) or v is None or type_of(v) not in ("int", "real", "bool"):
                    raise self.fail(f"an element-wise select gives a number or bool per index, not "
                                    f"{show(v)}", node)
            return np.where(cond, then, other)
        if isinstance(cond, Dyn):
            then = self.eval(e.then)
            other = self.eval(e.otherwise) if e.otherwise is not None else None
            if type_of(then) == "int" and type_of(other) == "int" and not is_pack(then) and not is_pack(other):
                los = [v.lo if isinstance(v, Dyn) else v for v in (then, other)]
                his = [v.hi if isinstance(v, Dyn) else v for v in (then, other)]
                return Dyn(f"({cond.key} ? {key_of(then)} : {key_of(other)})",
                           None if None in los else min(los), None if None in his else max(his))
            raise self.fail("the condition depends on run-time extents; it cannot select at compile time", e.cond)
        if type_of(cond) != "bool":
            raise self.fail(f"select condition must be bool, got {type_of(cond)}", e.cond)
        if cond:
            return self.eval(e.then)
        return self.eval(e.otherwise) if e.otherwise is not None else None

    def _coalesce(self, e: ast.Coalesce):
        left = self.eval(e.left)
        return left if left is not None else self.eval(e.right)

    def _fold(self, e: ast.Fold):
        value = self.eval(e.operand)
        if value is None:
            return None
        if not is_pack(value):
            raise self.fail(f"fold '{e.op} ..' needs a pack, got {show(value)}", e)
        return fold(e.op, value, e.cumulative, e, self)

    # ------------------------------------------------------------------ calls
    def _cast(self, e: ast.Cast):
        if e.operand is None:
            return DEFAULTS[e.type_name]
        value = self.eval(e.operand)
        if value is None:
            return None
        return elementwise(lambda v: cast(e.type_name, v, e, self), value)

    def _call(self, e: ast.Call):
        target = self.env.get(e.name)
        if self.runtime and e.name in self.lowering.dtypes:
            target = TypeValue(self.lowering.dtypes[e.name])      # a @dtype name of the invocation
        if isinstance(target, TypeValue):
            if len(e.args) > 1:
                raise self.fail(f"cast '{e.name}(...)' takes one argument", e)
            if not e.args:
                return DEFAULTS[target.name]
            value = self.eval(e.args[0])
            if value is None:
                return None
            return elementwise(lambda v: cast(target.name, v, e, self), value)
        if e.name in REAL_FUNCTIONS and len(e.args) == 1:
            # a function the grammar's built-in list lacks (erf), called as the @lower
            # interpreter calls it
            value = self.eval(e.args[0])
            return None if value is None else elementwise(lambda v: builtin(e.name, v, e, self), value)
        raise self.fail(f"'{e.name}(...)' is neither a built-in function nor a cast to a declared type",
                        e, hint="operators can only be invoked on the right-hand side in @compose")

    def _builtin(self, e: ast.Builtin):
        value = self.eval(e.operand)
        if value is None:
            return None
        return elementwise(lambda v: builtin(e.func, v, e, self), value)

    def _invocation(self, e: ast.Invocation):
        raise self.fail(f"operator invocation '{e.name}(...)' is not allowed inside an expression", e,
                        hint="invoke operators on the right-hand side of @compose assignments")

    def _access(self, e: ast.TensorAccess):
        if self.runtime:
            return self.lowering.access(self, e)
        raise self.fail("tensor access is only allowed in @lower formulas (2.4 Tensor access)", e)

    def _guard(self, e: ast.Guard):
        if self.runtime:
            return self.lowering.guard(self, e)
        raise self.fail("tensor access is only allowed in @lower formulas (2.4 Tensor access)", e)

    def _omitted(self, e):
        raise self.fail("'~' is only allowed for omitted arguments, outputs and extents", e)


def _text(e) -> str:
    return e.name if isinstance(e, ast.Name) else type(e).__name__


def _len(v) -> int:
    return len(v) if is_pack(v) else 1


# A compile-time pack is a Python tuple (some 36 bytes an int item): ranges and repeats longer
# than this are refused before they are built (2**24 items, about 600 MB).
MAX_PACK_LENGTH = 1 << 24


_DISPATCH: dict[type, Callable] = {
    ast.IntLit: Evaluator._literal, ast.RealLit: Evaluator._literal, ast.BoolLit: Evaluator._literal,
    ast.StrLit: Evaluator._string, ast.Name: Evaluator._name, ast.Member: Evaluator._member,
    ast.ListExpr: Evaluator._list, ast.Expand: Evaluator._expand, ast.Range: Evaluator._range,
    ast.Tuple: Evaluator._tuple, ast.Subscript: Evaluator._subscript,
    ast.Substitute: Evaluator._substitute, ast.Unary: Evaluator._unary, ast.Binary: Evaluator._binary,
    ast.Select: Evaluator._select, ast.Coalesce: Evaluator._coalesce, ast.Fold: Evaluator._fold,
    ast.Cast: Evaluator._cast, ast.Call: Evaluator._call, ast.Builtin: Evaluator._builtin,
    ast.Invocation: Evaluator._invocation, ast.TensorAccess: Evaluator._access,
    ast.Guard: Evaluator._guard, ast.Omitted: Evaluator._omitted,
}


def free_names(e) -> set[str]:
    """Identifiers an expression reads (for the @using/@assert interleaving of 2.9 and 2.6.2)."""
    out: set[str] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if node is None or isinstance(node, str):
            continue
        if isinstance(node, ast.Name):
            out.add(node.name)
            continue
        if isinstance(node, ast.Call):
            out.add(node.name)
        if isinstance(node, tuple):
            stack.extend(node)
            continue
        if isinstance(node, ast.Node):
            for f in node.__dataclass_fields__:
                if f == "loc":
                    continue
                stack.append(getattr(node, f))
    return out


def is_constant(e) -> bool:
    """A constant expression reads no identifiers (2.5: such defaults are substituted first)."""
    return not free_names(e)
