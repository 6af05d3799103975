"""NNEF 1.0 compile-time values (3.3.3): their types and texts, and the operators and casts of
table 1 on them. compose.py's Composer evaluates with these.
"""
from __future__ import annotations

import math
import reprlib
from typing import Any

from ..errors import Location, SemanticError
from ..limits import check_tensor_size
from .builder import TensorValue

Value = Any  # int | float | bool | str | list | tuple | TensorValue


def primitive_type(v: Value) -> str:
    if isinstance(v, bool):
        return "logical"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "scalar"
    if isinstance(v, str):
        return "string"
    if isinstance(v, TensorValue):
        return f"tensor<{v.item}>"
    return type_name(v)


def type_name(v: Value) -> str:
    if isinstance(v, list):
        return "array"
    if isinstance(v, tuple):
        return "tuple"
    if isinstance(v, TensorValue):
        return f"tensor<{v.item}>"
    return primitive_type(v)


def describe(v: Value) -> str:
    if isinstance(v, TensorValue):
        return f"tensor<{v.item}> '{v.name}'"
    return f"{type_name(v)} {reprlib.repr(v)}"   # reprlib: bounded length and depth


def deep_equal(a, b) -> bool:
    """Structural equality of compile-time values, with an explicit stack (values may nest
    deeper than Python's recursion limit through repeated assignments)."""
    pending = [(a, b)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b))
        elif not (type(a) is type(b) and a == b):
            return False
    return True


# Compile-time integers are int64 (3.3.3 leaves their width open; tensors of them are i64), and
# compile-time reals stay finite: a result outside is refused where it is computed.
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _checked(value: Value, op: str, loc: Location) -> Value:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise SemanticError(f"compile-time integer result of '{op}' is outside the 64-bit range",
                            location=loc, hint=f"compile-time integers lie in [{INT64_MIN}, {INT64_MAX}]")
    if isinstance(value, float) and not math.isfinite(value):
        raise SemanticError(f"compile-time real result of '{op}' is {value}", location=loc,
                            hint="compile-time reals must stay finite")
    if isinstance(value, complex):
        raise SemanticError(f"compile-time real result of '{op}' is not real (a negative base to a "
                            "fractional power)", location=loc)
    return value


def _repeat_length(count: int, copies: int, what: str, loc: Location) -> None:
    """Refuses an array or string of count x copies items past the tensor limit before making it."""
    check_tensor_size([count * max(copies, 0)], 8 if what == "array" else 1, f"compile-time {what}", loc)


def compile_time_binary(op: str, x: Value, y: Value, loc: Location) -> Value:
    tx, ty = type_name(x), type_name(y)

    def fail():
        raise SemanticError(f"operator '{op}' cannot combine {tx} and {ty}", location=loc)

    if op in ("&&", "||"):
        if tx != "logical" or ty != "logical":
            fail()
        return (x and y) if op == "&&" else (x or y)
    if op in ("==", "!="):
        equal = deep_equal(x, y)
        return equal if op == "==" else not equal
    if op == "+" and tx == ty and tx in ("array", "string"):
        _repeat_length(len(x) + len(y), 1, tx, loc)
        return x + y
    if op == "*" and tx in ("array", "string") and ty == "integer":
        _repeat_length(len(x), y, tx, loc)
        return x * y
    numeric = ("integer", "scalar")
    if tx not in numeric or ty not in numeric:
        fail()
    if tx != ty:
        fail()  # "applicable to integer arguments (but not mixed)" (3.3.3)
    if op in ("<", "<=", ">", ">="):
        return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
    if op == "+":
        return _checked(x + y, op, loc)
    if op == "-":
        return _checked(x - y, op, loc)
    if op == "*":
        return _checked(x * y, op, loc)
    if op == "/":
        if y == 0:
            raise SemanticError("division by zero in a compile-time expression", location=loc)
        return _checked(x // y if tx == "integer" else x / y, op, loc)
    if op == "^":
        if tx == "integer":
            if y < 0:
                fail()
            if abs(x) > 1 and y > 64:   # |x|^y >= 2^65: out of range, and not worth computing
                _checked(INT64_MAX + 1, op, loc)
            return _checked(x ** y, op, loc)
        if x == 0 and y < 0:
            raise SemanticError("0.0 ^ a negative power in a compile-time expression", location=loc)
        try:
            return _checked(x ** y, op, loc)
        except OverflowError:
            return _checked(math.inf, op, loc)
    fail()


def cast_primitive(name: str, x: Value, loc: Location) -> Value:
    t = type_name(x)
    try:
        if name == "scalar":
            if t == "string":
                return _checked(float(x), name, loc)
            if t in ("logical", "integer", "scalar"):
                return float(x)
        elif name == "integer":
            if t == "string":
                if len(x.strip()) > 40 and x.strip().lstrip("+-").isdigit():
                    # past int64 in any spelling (and int() itself refuses 4,300 digits)
                    return _checked(INT64_MAX + 1, name, loc)
                return _checked(int(x), name, loc)
            if t in ("logical", "integer"):
                return int(x)
            if t == "scalar":
                # "truncated to the closest smaller integer" (3.3.3); x is finite
                return _checked(math.floor(x), name, loc)
        elif name == "logical":
            if t in ("integer", "scalar", "logical"):
                return bool(x)
            if t == "string":
                return x != ""
        elif name == "string":
            if t == "logical":
                return "true" if x else "false"
            if t in ("integer", "scalar", "string"):
                return str(x)
    except ValueError:
        article = "an" if name[0] in "aeiou" else "a"
        raise SemanticError(f"{name}({reprlib.repr(x)}): the string is not {article} {name} literal",
                            location=loc) from None
    raise SemanticError(f"{name}() cannot convert a {t}", location=loc)
