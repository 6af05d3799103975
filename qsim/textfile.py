"""Model and configuration texts as bytes → str, with a located error for bytes that are not UTF-8.

Every text qsim reads from a user (main.sknd and its modules, graph.nnef, graph.quant, npu.toml,
quantization.json, labels.txt) is UTF-8 by its format's definition. A byte that does not decode
is reported at its line and column with its byte offset, never as a UnicodeDecodeError.
"""
from __future__ import annotations

from .errors import DataError, Location, QsimError


def decode_utf8(data: bytes, filename: str, *, kind: type[QsimError] = DataError,
                what: str = "the file", hint: str = "save the file as UTF-8",
                strip_bom: bool = False) -> str:
    """`data` decoded as UTF-8; otherwise `kind` located at the first bad byte.

    `strip_bom` drops a leading byte-order mark (editors on some systems write one)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        line_start = data.rfind(b"\n", 0, err.start) + 1
        column = len(data[line_start:err.start].decode("utf-8", errors="replace")) + 1
        raise kind(f"{what} is not UTF-8 text: byte 0x{data[err.start]:02x} at byte offset "
                   f"{err.start} ({err.reason})", location=Location(filename, line, column),
                   hint=hint) from None
    return text[1:] if strip_bom and text.startswith("\ufeff") else text
