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
import warnings
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .errors import DataError, Location, UsageError
from .limits import MAX_NESTING_DEPTH, check_tensor_size

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


def _read_array(f, total_bytes: int, where: str) -> np.ndarray:
    """The array of the .npy stream `f` of `total_bytes` bytes, after checking its header."""
    shape, fortran, dtype = _read_header(f, where)
    data_bytes = total_bytes - f.tell()
    if dtype.hasobject:
        raise DataError(f"{where}: the array holds Python objects (dtype {dtype}); qsim reads "
                        "numeric arrays only and never unpickles", hint=_NPY_HINT)
    if (dtype.kind not in NUMERIC_KINDS or dtype.fields is not None
            or dtype.subdtype is not None or dtype.itemsize == 0):
        raise DataError(f"{where}: dtype {dtype} is not a numeric array type",
                        hint="store bool, integer or float numbers")
    size = check_tensor_size(shape, dtype.itemsize, where, Location(where))
    if data_bytes < size:
        raise DataError(f"{where}: the header declares {list(shape)} {dtype} ({size} bytes), the "
                        f"file holds {data_bytes} bytes of data: it is truncated", hint=_NPY_HINT)
    array = np.empty(size // dtype.itemsize, dtype=dtype)
    try:
        got = f.readinto(memoryview(array).cast("B")) if size else 0
    except OSError as err:
        raise DataError(f"{where}: cannot read ({err.strerror or err})") from None
    if got != size:
        raise DataError(f"{where}: the file ends after {got} of {size} data bytes", hint=_NPY_HINT)
    return array.reshape(shape, order="F" if fortran else "C")


def _open(path: Path, where: str):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{where}: a folder, not a .npy file") from None
    except OSError as err:
        raise DataError(f"{where}: cannot open ({err.strerror or err})") from None


def read_npy(path: str | os.PathLike, what: str = "") -> np.ndarray:
    """The numeric array in the .npy file `path`; `what` (e.g. '--input') starts messages."""
    path = Path(path)
    where = f"{what} {path}".strip()
    with _open(path, where) as f:
        head = f.read(4)
        if head[:2] == b"PK":
            raise DataError(f"{where}: a .npz archive, not one .npy array",
                            hint="save one array per file with numpy.save")
        if not head:
            raise DataError(f"{where}: the file is empty", hint=_NPY_HINT)
        f.seek(0)
        return _read_array(f, os.fstat(f.fileno()).st_size, where)


def read_npz(path: str | os.PathLike, what: str = "") -> dict[str, np.ndarray]:
    """Every array of the .npz archive `path` by name (checked like read_npy, each member's
    declared size checked before it is read)."""
    path = Path(path)
    where = f"{what} {path}".strip()
    try:
        archive = zipfile.ZipFile(path)
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
