"""Arrays from the user's files (`--input x.npy`, `--calib d.npz`), read without trusting them.

numpy's own loaders fail on bad files with EOFError, ValueError or MemoryError, unpickle when
allowed to, and allocate whatever size a header claims. Here a `.npy` file or `.npz` member is
read in three steps: its header (magic, dtype, shape), the checks (no Python objects, a numeric
dtype, the size within qsim.limits and within what the file holds), then the data. Every
failure is a DataError naming the file.

`read_inputs(names, specs)` reads the arrays of `--input [NAME=]x.npy` options (the one reader
of every command that takes model inputs).

`check_finite(array, what)` is the NaN/infinity policy: float data that is NaN, infinite, or
outside float32's range (it would become infinite where qsim computes in float32) is an error
naming the tensor and the index of the first such element. qsim does not saturate or drop such
values silently: a NaN in calibration data would decide the scales, a NaN input the result.
"""
from __future__ import annotations

import io
import os
import stat
import warnings
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import DataError, Location, UsageError
from .limits import MAX_NESTING_DEPTH, check_tensor_size, format_bytes, max_tensor_bytes

NUMERIC_KINDS = "biuf"      # bool, signed, unsigned, float; not complex, strings, objects, dates
FLOAT32_MAX = float(np.finfo(np.float32).max)
_NPY_HINT = "save the array with numpy.save(path, array) (a numeric array, not a list of objects)"


def _read_header(f, where: str):
    """(shape, fortran_order, dtype) of the .npy stream `f`, positioned at the data."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
    except (ValueError, EOFError, OSError) as err:
        start = ""
        if isinstance(err, ValueError) and "magic" in str(err):
            start = " (it does not start with the .npy magic \\x93NUMPY)"
        raise DataError(f"{where}: not a .npy array{start}", hint=_NPY_HINT) from None
    # (version 3.0 differs from 2.0 only in allowing non-Latin-1 field names, and qsim refuses
    # structured arrays anyway)
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    if version not in readers:
        raise DataError(f"{where}: .npy format version {version[0]}.{version[1]} is not supported "
                        "(qsim reads 1.0 and 2.0)", hint=_NPY_HINT)
    try:
        with warnings.catch_warnings():     # (numpy warns about headers it repairs)
            warnings.simplefilter("ignore")
            return readers[version](f, max_header_size=1 << 16)
    except Exception as err:  # noqa: BLE001 - numpy parses the header with tokenize and ast,
        # whose failures have many types; a damaged header is what they all mean
        raise DataError(f"{where}: the .npy header is damaged ({type(err).__name__}: {err})",
                        hint=_NPY_HINT) from None


def _read_array(f, total_bytes: int | None, where: str) -> np.ndarray:
    """The array of the .npy stream `f` of `total_bytes` bytes (None: a pipe, whose length is
    known only at its end), after checking its header: never more than the header declares,
    and that within qsim.limits, is read."""
    shape, fortran, dtype = _read_header(f, where)
    if dtype.hasobject:
        raise DataError(f"{where}: the array holds Python objects (dtype {dtype}); qsim reads "
                        "numeric arrays only and never unpickles", hint=_NPY_HINT)
    if (dtype.kind not in NUMERIC_KINDS or dtype.fields is not None
            or dtype.subdtype is not None or dtype.itemsize == 0):
        raise DataError(f"{where}: dtype {dtype} is not a numeric array type",
                        hint="store bool, integer or float numbers")
    size = check_tensor_size(shape, dtype.itemsize, where, Location(where))
    if total_bytes is not None and total_bytes - f.tell() < size:
        raise DataError(f"{where}: the header declares {list(shape)} {dtype} ({size} bytes), the "
                        f"file holds {total_bytes - f.tell()} bytes of data: it is truncated", hint=_NPY_HINT)
    array = np.empty(size // dtype.itemsize, dtype=dtype)
    got = _read_into(f, memoryview(array).cast("B"), where) if size else 0
    if got != size:
        raise DataError(f"{where}: the file ends after {got} of {size} data bytes", hint=_NPY_HINT)
    return array.reshape(shape, order="F" if fortran else "C")


def _read_into(f, buffer: memoryview, where: str) -> int:
    """Fills `buffer` from `f` (a pipe gives its bytes in pieces); the bytes read."""
    got = 0
    try:
        while got < len(buffer):
            n = f.readinto(buffer[got:])
            if not n:
                break
            got += n
    except OSError as err:
        raise DataError(f"{where}: cannot read ({err.strerror or err})") from None
    return got


def _open(path: Path, where: str):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{where}: a folder, not a .npy file") from None
    except OSError as err:
        raise DataError(f"{where}: cannot open ({err.strerror or err})") from None


def is_stream(path: str | os.PathLike) -> bool:
    """Whether `path` is a pipe or another file that can be read only once, front to back
    (`--input <(cat x.npy)` gives /dev/fd/N): no size, no seeking, no second open."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False        # opening it reports what is wrong


def _read_stream(f, where: str) -> bytes:
    """All of the pipe `f`, refused once it passes the limit on one tensor (an archive from a
    pipe must be held whole: zip keeps its directory at the end)."""
    limit = max_tensor_bytes()
    chunks, total = [], 0
    try:
        while True:
            chunk = f.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise DataError(f"{where}: an archive read from a pipe is held in memory, and this one "
                                f"passes the {format_bytes(limit)} limit on one tensor",
                                hint="save it to a file, or raise the limit with --max-tensor-bytes")
    except OSError as err:
        raise DataError(f"{where}: cannot read ({err.strerror or err})") from None


def read_npy(path: str | os.PathLike, what: str = "") -> np.ndarray:
    """The numeric array in the .npy file `path` (a regular file or a pipe); `what` (e.g.
    '--input') starts messages."""
    data = read_npy_or_npz(path, what, npz=False)
    assert isinstance(data, np.ndarray)
    return data


def read_npz(path: str | os.PathLike, what: str = "") -> dict[str, np.ndarray]:
    """Every array of the .npz archive `path` (a regular file or a pipe) by name (checked like
    read_npy, each member's declared size checked before it is read)."""
    path = Path(path)
    where = f"{what} {path}".strip()
    if is_stream(path):
        with _open(path, where) as f:
            return _npz_arrays(io.BytesIO(_read_stream(f, where)), path, where)
    return _npz_arrays(path, path, where)


def read_npy_or_npz(path: str | os.PathLike, what: str = "", *,
                    npz: bool = True) -> np.ndarray | dict[str, np.ndarray]:
    """The array of a .npy file, or (npz=True) the arrays of a .npz archive by name, told
    apart by their first bytes: a pipe has no suffix to go by, and can be read only once."""
    path = Path(path)
    where = f"{what} {path}".strip()
    stream = is_stream(path)
    with _open(path, where) as f:
        head = f.peek(4)[:4]
        if head[:2] == b"PK":
            if not npz:
                raise DataError(f"{where}: a .npz archive, not one .npy array",
                                hint="save one array per file with numpy.save")
            if not stream:
                return _npz_arrays(path, path, where)
            return _npz_arrays(io.BytesIO(_read_stream(f, where)), path, where)
        if not head:
            raise DataError(f"{where}: the file is empty", hint=_NPY_HINT)
        return _read_array(f, None if stream else os.fstat(f.fileno()).st_size, where)


def _npz_arrays(source, path: Path, where: str) -> dict[str, np.ndarray]:
    try:
        archive = zipfile.ZipFile(source)
    except FileNotFoundError:
        raise DataError(f"{where}: no such file") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise DataError(f"{where}: not a .npz archive ({err})",
                        hint="save arrays with numpy.savez(path, x=inputs, y=labels)") from None
    arrays = {}
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            member = f"{where}[{name}]"
            check_tensor_size((info.file_size,), 1, member, Location(str(path)))
            try:
                with archive.open(info) as f:
                    data = f.read()
            except (zipfile.BadZipFile, OSError, ValueError, EOFError,
                    NotImplementedError, RuntimeError) as err:
                raise DataError(f"{member}: cannot read the archive member ({err})") from None
            arrays[name] = _read_array(io.BytesIO(data), len(data), member)
    return arrays


def input_files(names: Sequence[str], specs: Sequence[str], what: str = "--input") -> dict[str, str]:
    """The file of each named input from `--input` specs: `NAME=x.npy` names an input, a plain
    `x.npy` takes the next input not named (in `names` order); a path holding '=' that exists
    is a plain file. Every input needs one file (UsageError otherwise)."""
    named, positional = {}, []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and name in names:
            if name in named:
                raise UsageError(f"{what} {spec}: input '{name}' is given twice")
            named[name] = path
        elif sep and not Path(spec).exists():
            raise UsageError(f"{what} {spec}: the model has no input '{name}'",
                             hint="its inputs: " + ", ".join(names))
        else:
            positional.append(spec)
    free = [n for n in names if n not in named]
    if len(positional) > len(free):
        raise UsageError(f"{what} {positional[len(free)]}: the model has {len(names)} input(s) "
                         f"({', '.join(names)}), {len(specs)} {what} given",
                         hint=f"pass one {what} per model input, or NAME=x.npy")
    named.update(zip(free, positional))
    missing = [n for n in names if n not in named]
    if missing:
        raise UsageError(f"no {what} for model input(s) {', '.join(missing)}",
                         hint=f"pass one {what} per model input ({', '.join(names)}), or NAME=x.npy")
    return {n: named[n] for n in names}


def read_inputs(names: Sequence[str], specs: Sequence[str], what: str = "--input") -> dict[str, np.ndarray]:
    """The arrays of `--input [NAME=]x.npy` specs by input name (input_files), each read by
    read_npy and refused when it holds NaN or infinite values (check_finite)."""
    arrays = {}
    for name, path in input_files(names, specs, what).items():
        arrays[name] = read_npy(path, what)
        check_finite(arrays[name], f"{what} {path} (input '{name}')")
    return arrays


def first_bad_float(array: np.ndarray) -> tuple[tuple[int, ...], float] | None:
    """(index, value) of the first element (C order) that is NaN, infinite or beyond float32's
    range; None when every element is fine or the array holds no floats."""
    array = np.asarray(array)
    if array.dtype.kind != "f" or array.size == 0:
        return None
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(array)
        if array.dtype.itemsize > 4:
            bad |= np.abs(array) > FLOAT32_MAX
    if not bad.any():
        return None
    flat = int(np.argmax(bad.reshape(-1)))
    index = tuple(int(i) for i in np.unravel_index(flat, array.shape))
    return index, float(array.reshape(-1)[flat])


def check_finite(array: np.ndarray, what: str, location: Location | None = None) -> None:
    """Refuses float data holding NaN, infinity or values float32 cannot hold (see module doc)."""
    found = first_bad_float(array)
    if found is None:
        return
    index, value = found
    kind = "NaN" if value != value else ("infinite" if abs(value) == float("inf")
                                         else f"{value:g}, beyond float32's range")
    raise DataError(f"{what}: element {list(index)} is {kind}", location=location,
                    hint="qsim refuses NaN and infinite values in input, calibration and "
                         "evaluation data; replace them (e.g. numpy.nan_to_num) or drop the "
                         "samples that hold them")


def nesting_depth(text: str, *, toml: bool = False) -> int:
    """How deeply arrays/objects ([ and {) nest in a JSON text, or in a TOML text with toml=True
    (its '...' literal and triple-quoted strings and # comments skipped too). Checked against
    qsim.limits.MAX_NESTING_DEPTH before a recursive parser (json, tomllib) sees the text, so
    that Python's recursion limit never decides whether a file loads."""
    depth = deepest = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"' or (toml and ch == "'"):
            quote = text[i:i + 3] if toml and text[i:i + 3] == ch * 3 else ch
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                i += 2 if ch == '"' and text[i] == "\\" else 1
            i += len(quote)
            continue
        if toml and ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
        i += 1
    return deepest


def check_nesting(text: str, where: str, *, toml: bool = False) -> None:
    """Refuses a JSON/TOML text nested deeper than qsim.limits.MAX_NESTING_DEPTH."""
    if nesting_depth(text, toml=toml) > MAX_NESTING_DEPTH:
        raise DataError(f"arrays or tables nested more than {MAX_NESTING_DEPTH} levels deep",
                        location=Location(where), hint="the files qsim reads nest a few levels at "
                        "most; was this one damaged or generated by mistake?")
