"""Bounds-checked access to a flatbuffer's tables, vectors and strings.

The `flatbuffers` runtime's Table reads what an offset points at without asking whether it
lies in the buffer (a hostile file gives an IndexError or struct.error deep inside it, or a
read of unrelated bytes). Every access here first checks, against the buffer's length, the
object, its vtable (length, object size, field offsets within the object), and each vector's
header and extent, then reads through the runtime's `Table`. A check that fails raises a
DataError naming what was read (`what`), so the message says which table of the model is
broken. Layout facts (FlatBuffers internals): a table starts with an int32 soffset to its
vtable (vtable = table - soffset); the vtable holds uint16 [vtable bytes, object bytes,
field offsets...]; an offset field holds a uint32 relative to its own position; a vector
is a uint32 count followed by its elements; a string is a byte vector with a 0 after it.
"""
from __future__ import annotations

import struct

import numpy as np
from flatbuffers import number_types as N
from flatbuffers.table import Table as RuntimeTable

from ..errors import DataError, Location


class Buffer:
    """The file's bytes and where they came from (for messages)."""

    def __init__(self, data, location: Location):
        self.data = data
        self.size = len(data)
        self.location = location

    def fail(self, message: str, hint: str | None = None):
        raise DataError(message, location=self.location,
                        hint=hint or "the .tflite file is damaged or not a TFLite model; export it again")

    def check(self, pos: int, nbytes: int, what: str) -> None:
        if pos < 0 or nbytes < 0 or pos + nbytes > self.size:
            self.fail(f"{what}: bytes {pos}..{pos + nbytes} lie outside the file ({self.size} bytes)")

    def u32(self, pos: int, what: str) -> int:
        self.check(pos, 4, what)
        return struct.unpack_from("<I", self.data, pos)[0]

    def table_at(self, pos: int, what: str) -> "Table":
        return Table(self, pos, what)

    def root(self, what: str) -> "Table":
        return self.table_at(self.u32(0, f"{what} root offset"), what)


class Table:
    """One table of the buffer, with its vtable checked."""

    def __init__(self, buf: Buffer, pos: int, what: str):
        buf.check(pos, 4, what)
        soffset = struct.unpack_from("<i", buf.data, pos)[0]
        vtable = pos - soffset
        buf.check(vtable, 4, f"{what} vtable")
        vt_bytes, obj_bytes = struct.unpack_from("<HH", buf.data, vtable)
        if vt_bytes < 4 or vt_bytes % 2:
            buf.fail(f"{what}: vtable length {vt_bytes} is not an even number of at least 4 bytes")
        buf.check(vtable, vt_bytes, f"{what} vtable")
        if obj_bytes < 4:
            buf.fail(f"{what}: object length {obj_bytes} is below the 4 bytes of its vtable offset")
        buf.check(pos, obj_bytes, what)
        self.buf, self.pos, self.what = buf, pos, what
        self.vtable, self.vt_bytes, self.obj_bytes = vtable, vt_bytes, obj_bytes
        self.tab = RuntimeTable(buf.data, pos)

    def _field(self, slot: int, nbytes: int) -> int:
        """The field's offset within the object (0: absent), checked to hold `nbytes`."""
        entry = 4 + 2 * slot
        if entry >= self.vt_bytes:
            return 0
        offset = self.tab.Offset(entry)
        if offset and (offset < 4 or offset + nbytes > self.obj_bytes):
            self.buf.fail(f"{self.what}: field {slot} at offset {offset} lies outside its "
                          f"{self.obj_bytes}-byte object")
        return offset

    def scalar(self, slot: int, flags, default):
        offset = self._field(slot, flags.bytewidth)
        return default if not offset else self.tab.Get(flags, self.pos + offset)

    def _target(self, slot: int, what: str) -> int | None:
        offset = self._field(slot, 4)
        if not offset:
            return None
        at = self.pos + offset
        return at + self.buf.u32(at, what)

    def table(self, slot: int, what: str) -> "Table | None":
        target = self._target(slot, what)
        return None if target is None else Table(self.buf, target, what)

    def _vector(self, slot: int, itemsize: int, what: str) -> tuple[int, int] | None:
        """(start of the elements, count), checked to lie in the buffer."""
        target = self._target(slot, what)
        if target is None:
            return None
        count = self.buf.u32(target, f"{what} length")
        self.buf.check(target + 4, count * itemsize, f"{what} ({count} elements of {itemsize} bytes)")
        return target + 4, count

    def array(self, slot: int, dtype: str, what: str) -> np.ndarray | None:
        """A vector of scalars as a numpy array (little-endian `dtype`, a copy)."""
        dt = np.dtype(dtype).newbyteorder("<")
        found = self._vector(slot, dt.itemsize, what)
        if found is None:
            return None
        start, count = found
        return np.frombuffer(self.buf.data, dtype=dt, count=count, offset=start).astype(dt.newbyteorder("="))

    def bytes_view(self, slot: int, what: str) -> tuple[int, int] | None:
        """(offset, length) of a byte vector, for data too large to copy eagerly."""
        return self._vector(slot, 1, what)

    def tables(self, slot: int, what: str) -> list["Table"]:
        found = self._vector(slot, 4, what)
        if found is None:
            return []
        start, count = found
        return [Table(self.buf, start + 4 * i + self.buf.u32(start + 4 * i, what), f"{what}[{i}]")
                for i in range(count)]

    def string(self, slot: int, what: str) -> str | None:
        found = self._vector(slot, 1, what)
        if found is None:
            return None
        start, count = found
        raw = bytes(self.buf.data[start:start + count])
        return raw.decode("utf-8", errors="replace")


UINT8, INT8, UINT16, INT32, UINT32, INT64, UINT64, FLOAT32, BOOL = (
    N.Uint8Flags, N.Int8Flags, N.Uint16Flags, N.Int32Flags, N.Uint32Flags, N.Int64Flags, N.Uint64Flags,
    N.Float32Flags, N.BoolFlags)
