"""Every user-facing failure in qsim is a QsimError of one of the kinds below.

The CLI turns a QsimError into a message and exit code 2 (bad input) without a
traceback; anything else escaping is an internal error (exit code 1).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class ErrorKind(enum.Enum):
    USAGE = "usage"                  # bad command line / API call (unknown op, wrong arg type)
    SYNTAX = "syntax"                # model text does not parse
    SEMANTIC = "semantic"            # parses, but types/shapes/bindings/assertions fail
    INVALID_GRAPH = "invalid graph"  # TOSA ERROR_IF: the graph is not a valid TOSA graph
    UNPREDICTABLE = "unpredictable"  # TOSA REQUIRE: the result would be unpredictable
    DATA = "data"                    # bad tensor file, calibration data, config file
    UNSUPPORTED = "unsupported"      # valid input qsim cannot handle (e.g. no lowering)
    MISMATCH = "mismatch"            # two executions that must agree do not


@dataclass(frozen=True)
class Location:
    """Where in a source file an error is (1-based line and column)."""
    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        parts = [self.file]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)


class QsimError(Exception):
    """A failure a person can act on: what went wrong, where, and how to fix it."""

    kind: ErrorKind = ErrorKind.USAGE

    def __init__(self, message: str, *, location: Location | None = None,
                 hint: str | None = None, kind: ErrorKind | None = None):
        if kind is not None:
            self.kind = kind
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self.format())

    def format(self) -> str:
        text = f"{self.kind.value} error: {self.message}"
        if self.location is not None:
            text = f"{self.location}: {text}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class UsageError(QsimError):
    kind = ErrorKind.USAGE


class SyntaxError_(QsimError):
    """Model text does not parse (named with a trailing underscore to keep Python's builtin)."""
    kind = ErrorKind.SYNTAX


class SemanticError(QsimError):
    kind = ErrorKind.SEMANTIC


class InvalidGraphError(QsimError):
    """A TOSA ERROR_IF condition holds: message names the operator, tensor/attribute, condition."""
    kind = ErrorKind.INVALID_GRAPH


class UnpredictableError(QsimError):
    """A TOSA REQUIRE condition fails: the spec leaves the result unpredictable."""
    kind = ErrorKind.UNPREDICTABLE


class DataError(QsimError):
    kind = ErrorKind.DATA


class UnsupportedError(QsimError):
    kind = ErrorKind.UNSUPPORTED


class MismatchError(QsimError):
    kind = ErrorKind.MISMATCH
