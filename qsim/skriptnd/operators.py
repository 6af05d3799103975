"""What SkriptND's expression operators do to the evaluator's values (NNEF 2.0 draft 2.4): the
type rules, null and pack lifting, folds, casts and built-in functions on compile-time values,
run-time extents (interval bounds) and arrays. The arithmetic itself is semantics.py's.

Every function takes the evaluator (`ev`) for its located errors and its use: arrays are
compile-time index grids of a per-element constant (2.7) when composing, where an int past 64
bits, a division by zero or an undefined built-in result is refused like on a single value; in
a @lower formula (ev.runtime) they are run-time data and index grids, computed as their numpy
types compute (what the fast paths are held to). The type rules (same types on both sides,
`%` on ints, casts between int, real and bool) hold in both uses.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .semantics import BINARY, REAL_FUNCTIONS, cast_value
from .values import CONCRETE_TYPES, Dyn, TensorValue, Uniform, is_pack, same, show, type_of, uniform_value

ARITH_OPS = {"+", "-", "*", "/", "\\", "%", "**", "<?", ">?"}
CMP_OPS = {"<", "<=", ">", ">=", "==", "!="}
LOGIC_OPS = {"&&", "||", "^", "=>"}


def key_of(v) -> str:
    return v.key if isinstance(v, Dyn) else show(v)


def elementwise(fn, value):
    if is_pack(value):
        result = tuple(fn(v) for v in value)
        if isinstance(value, Uniform):
            return Uniform(fn(value.uniform), len(value))
        return result
    return fn(value)


def pairwise(fn, a, b, length_error):
    if is_pack(a) and is_pack(b):
        if len(a) != len(b):
            raise length_error()
        if isinstance(a, Uniform) and isinstance(b, Uniform):
            return Uniform(fn(a.uniform, b.uniform), len(a))
        return tuple(fn(x, y) for x, y in zip(a, b))
    if is_pack(a):
        if isinstance(a, Uniform):
            return Uniform(fn(a.uniform, b), len(a))
        return tuple(fn(x, b) for x in a)
    if is_pack(b):
        if isinstance(b, Uniform):
            return Uniform(fn(a, b.uniform), len(b))
        return tuple(fn(a, y) for y in b)
    return fn(a, b)


# Operators of 2.4 on tensors are not compile-time expressions; @compose invokes these instead.
_TENSOR_OPERATORS = {"+": "math.add", "-": "math.sub", "*": "math.mul", "/": "math.div",
                     "%": "math.mod", "**": "math.pow", "<?": "math.min", ">?": "math.max",
                     "<": "math.lt", ">": "math.gt", "<=": "math.le", ">=": "math.ge",
                     "==": "math.eq", "!=": "math.ne", "&&": "math.and", "||": "math.or",
                     "^": "math.xor", "!": "math.not", "neg": "math.neg"}

# Compile-time ints are mathematical integers (2.3), but qsim keeps computed ones below 2**14280,
# which has 4299 decimal digits: Python prints ints of at most 4300 digits (the literal limit,
# syntax_expressions.MAX_INT_LITERAL_DIGITS), so every result can still be shown in a message, and
# `10 ** 10 ** 10` is refused instead of taking unbounded time and memory.
MAX_INT_BITS = 14_280


def no_tensors(op: str, values, e, ev) -> None:
    tensor = next((v for v in values if isinstance(v, TensorValue)), None)
    if tensor is not None:
        name = _TENSOR_OPERATORS.get(op)
        raise ev.fail(f"'{op}' is applied to tensor '{tensor.name}': expression operators work on "
                      f"compile-time values only (2.4)", e,
                      hint="invoke an operator on the right-hand side of an @compose assignment"
                           + (f", e.g. {name}(...)" if name else ""))


def _int_sized(value, e, ev):
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ev.fail(f"compile-time int result has {value.bit_length()} bits, more than qsim "
                      f"evaluates ({MAX_INT_BITS} bits, about 4299 digits)", e,
                      hint="no tensor extent or attribute can hold such a value; check the expression")
    return value


def _array_int_result(op: str, a, b, e, ev):
    """`a op b` on int index grids (per-element initializers, 2.7): ints are mathematical (2.3),
    so a result past int64, a division by zero or a negative power is an error, not a wrapped
    or undefined value."""
    for v in (a, b):
        if isinstance(v, int) and not -2 ** 63 <= v < 2 ** 63:
            raise ev.fail(f"'{op}' of an index grid with the int {show(v)}, which is past 64 bits", e)
    if op in ("/", "\\", "%") and np.any(np.asarray(b) == 0):
        raise ev.fail(f"division by zero in '{op}' for some index", e)
    if op == "**" and np.any(np.asarray(b) < 0):
        raise ev.fail("int power with a negative exponent for some index", e)
    with np.errstate(all="ignore"):
        wide = {"+": np.add, "-": np.subtract, "*": np.multiply, "**": np.power}.get(op)
        if wide is not None:
            estimate = wide(np.asarray(a, np.float64), np.asarray(b, np.float64))
            if not np.all(np.abs(estimate) < 2.0 ** 62):
                raise ev.fail(f"'{op}' gives ints past 64 bits for some index", e)


def _power(a, b, ta: str, arrays: bool, e, ev):
    if arrays:
        return BINARY["**"](a, b)
    if ta == "int":
        if b < 0:
            raise ev.fail(f"int power with negative exponent {b}", e)
        if abs(a) > 1 and (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            raise ev.fail(f"'{show(a)} ** {show(b)}' has more than {MAX_INT_BITS} bits, more than "
                          f"qsim evaluates at compile time", e,
                          hint="no tensor extent or attribute can hold such a value")
        return a ** b
    if ev.runtime:              # run-time data: IEEE results (NaN, inf) as the tensor computes them
        with np.errstate(all="ignore"):
            return float(np.power(np.float64(a), b))
    try:
        return math.pow(a, b)
    except ValueError:
        raise ev.fail(f"'{show(a)} ** {show(b)}' is undefined for reals", e) from None
    except OverflowError:
        raise ev.fail(f"'{show(a)} ** {show(b)}' overflows 64-bit reals", e,
                      hint="write 'inf' if infinity is meant") from None


def binary_scalar(op: str, a, b, e, ev):
    no_tensors(op, (a, b), e, ev)
    ta, tb = type_of(a), type_of(b)
    if isinstance(a, Dyn) or isinstance(b, Dyn):
        return _dyn_binary(op, a, b, e, ev)
    arrays = isinstance(a, np.ndarray) or isinstance(b, np.ndarray)
    if op in ARITH_OPS:
        # 2.4 asks for the same type on both sides; the spec's own 2.12 example raises a real to
        # an int power (`x[i] ** 2`), so `**` also takes a real base with an int exponent
        real_power = op == "**" and ta == "real" and tb == "int"
        if ta not in ("int", "real") or tb not in ("int", "real") or (ta != tb and not real_power):
            raise ev.fail(f"'{op}' needs two ints or two reals, got {ta} and {tb}", e,
                          hint="convert with real(...) or int(...)")
        if arrays and ev.runtime:
            pass                    # run-time data computes as its numpy type does
        elif arrays and ta == "int":
            _array_int_result(op, a, b, e, ev)
        elif arrays and op == "/" and np.any(np.asarray(b) == 0):
            raise ev.fail(f"division by zero in '{op}' for some index", e)
        if op == "+":
            return _int_sized(a + b, e, ev)
        if op == "-":
            return _int_sized(a - b, e, ev)
        if op == "*":
            if ta == "int" and not arrays and a.bit_length() + b.bit_length() > MAX_INT_BITS + 1:
                return _int_sized(a * b, e, ev)     # at most ~2 * MAX_INT_BITS: cheap, then refused
            return a * b
        if op in ("/", "\\", "%") and not arrays and b == 0:
            raise ev.fail(f"division by zero in '{op}'", e)
        if op == "**":
            return _power(a, b, ta, arrays, e, ev)
        return BINARY[op](a, b)
    if op in CMP_OPS:
        if ta != tb:
            raise ev.fail(f"'{op}' compares values of the same type, got {ta} and {tb}", e)
        return BINARY[op](a, b)
    if op in LOGIC_OPS:
        if ta != "bool" or tb != "bool":
            raise ev.fail(f"'{op}' needs bools, got {ta} and {tb}", e)
        return BINARY[op](a, b)
    raise ev.fail(f"unknown operator '{op}'", e)


def _dyn_binary(op, a, b, e, ev):
    """Interval arithmetic on run-time integers; comparisons become undecidable bools."""
    for v in (a, b):
        if type_of(v) not in ("int", "bool"):
            raise ev.fail(f"'{op}' mixes a run-time extent with {type_of(v)}", e)
    key = f"({key_of(a)} {op} {key_of(b)})"
    if op in CMP_OPS or op in LOGIC_OPS:
        return Dyn(key, kind="bool")
    alo, ahi = (a.lo, a.hi) if isinstance(a, Dyn) else (a, a)
    blo, bhi = (b.lo, b.hi) if isinstance(b, Dyn) else (b, b)

    def combine(fn):
        try:
            cands = [fn(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        except (TypeError, ZeroDivisionError):
            return None, None
        return min(cands), max(cands)
    if op == "+":
        lo, hi = combine(lambda x, y: x + y)
    elif op == "-":
        lo, hi = combine(lambda x, y: x - y)
    elif op == "*":
        lo, hi = combine(lambda x, y: x * y)
    elif op in ("/", "\\"):
        lo, hi = combine(BINARY[op]) if (blo or 0) > 0 else (None, None)
    elif op == "<?":
        lo, hi = combine(min)
    elif op == ">?":
        lo, hi = combine(max)
    else:
        lo, hi = None, None
    return Dyn(key, lo, hi)


def fold(op: str, value: tuple, cumulative: bool, e, ev):
    if op == ":=":
        return uniform_value(value)
    if any(isinstance(v, Dyn) for v in value):
        if op in ("+", "*", "<?", ">?") and not cumulative:
            acc = value[0] if value else (0 if op == "+" else 1)
            for v in value[1:]:
                acc = _dyn_binary(op, acc, v, e, ev)
            return acc
        if cumulative:
            out, acc = [], None
            for v in value:
                acc = v if acc is None else _dyn_binary(op, acc, v, e, ev)
                out.append(acc)
            return tuple(out)
        return Dyn(f"({op} fold)", kind="bool")
    types = {type_of(v) for v in value}
    if len(types) > 1:
        raise ev.fail(f"fold over mixed types {sorted(t for t in types if t)}", e)
    t = types.pop() if types else None
    if op in ("+", "*", "<?", ">?") and t not in (None, "int", "real"):
        raise ev.fail(f"fold '{op}' needs ints or reals, got {t}", e)
    if op in ("&&", "||") and t not in (None, "bool"):
        raise ev.fail(f"fold '{op}' needs bools, got {t}", e)
    if op in ("<?", ">?") and not value and not cumulative:
        raise ev.fail(f"fold '{op} ..' of an empty pack is undefined (2.4)", e)
    if cumulative:
        out, acc = [], None
        for v in value:
            acc = v if acc is None else binary_scalar(op if op not in ("&&", "||") else op, acc, v, e, ev)
            out.append(acc)
        return tuple(out)
    if op == "+":
        return sum(value, 0 if t != "real" else 0.0)
    if op == "*":
        acc = 1 if t != "real" else 1.0
        for v in value:
            acc = _int_sized(acc * v, e, ev)
        return acc
    if any(isinstance(v, np.ndarray) for v in value) and op in ("&&", "||", "<?", ">?"):
        return functools.reduce(BINARY[op], value)      # index grids or run-time data, per element
    if op == "&&":
        return all(value)
    if op == "||":
        return any(value)
    if op in ("<?", ">?"):
        return min(value) if op == "<?" else max(value)
    if op == "!=":
        return all(not same(value[i], value[j]) for i in range(len(value)) for j in range(i + 1, len(value)))
    if op == "==":
        return all(same(value[i], value[i + 1]) for i in range(len(value) - 1))
    cmp = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
           ">=": lambda x, y: x >= y}[op]
    return all(cmp(value[i], value[i + 1]) for i in range(len(value) - 1))


def cast(type_name: str, v, e, ev):
    no_tensors(f"{type_name}(...)", (v,), e, ev)
    t = type_of(v)
    if type_name not in CONCRETE_TYPES:
        raise ev.fail(f"cannot cast to abstract type '{type_name}'", e)
    if t == "str" or type_name == "str":
        if t == type_name:
            return v
        raise ev.fail(f"cannot cast {t} to {type_name} (2.4 Casting: only int, real and bool)", e)
    if isinstance(v, Dyn):
        return v if type_name == "int" else Dyn(f"{type_name}({v.key})", kind=type_name)
    if isinstance(v, np.ndarray):
        if type_name == "int" and t == "real" and not ev.runtime and not np.all(np.abs(v) < 2.0 ** 63):
            raise ev.fail(f"cannot cast {show(v)} to int at compile time (2.4 Casting): not finite "
                          "or past 64 bits for some index", e)
        return cast_value(type_name, v)
    if type_name == "int" and t == "real" and not math.isfinite(v):
        raise ev.fail(f"cannot cast {show(v)} to int at compile time (2.4 Casting)", e)
    return cast_value(type_name, v)


def builtin(func: str, v, e, ev):
    no_tensors(func, (v,), e, ev)
    t = type_of(v)
    if isinstance(v, Dyn):
        raise ev.fail(f"'{func}' of a run-time extent cannot be evaluated at compile time", e)
    if func in ("abs", "sign"):
        if t not in ("int", "real"):
            raise ev.fail(f"'{func}' needs an int or real, got {t}", e)
        if func == "abs":
            return abs(v) if not isinstance(v, np.ndarray) else np.abs(v)
        s = np.sign(v)
        return s if isinstance(v, np.ndarray) else type(v)(s)
    if t != "real":
        raise ev.fail(f"'{func}' needs a real, got {t}", e, hint="convert with real(...)")
    if ev.runtime:              # run-time data: IEEE results (NaN, inf) as the tensor computes them
        with np.errstate(all="ignore"):
            r = REAL_FUNCTIONS[func](v)
        return r if isinstance(r, np.ndarray) else float(r)
    try:
        with np.errstate(all="raise"):
            r = REAL_FUNCTIONS[func](v)
    except (FloatingPointError, ValueError) as err:
        raise ev.fail(f"'{func}({show(v)})' is undefined: {err}", e) from None
    return r if isinstance(r, np.ndarray) else float(r)
