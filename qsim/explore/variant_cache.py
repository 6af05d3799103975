"""Each precision's quantized model of `qsim explore`, cached on disk between runs.

Quantizing a network and scoring its integer model takes minutes on a small machine, and an
exploration does it once per precision before any point runs; a second exploration of the same
network and data (another space, another cluster) then reads the result. The cache
(`<cache root>/explore/<key>.pickle`, qsim.cachedir: private to the user, since loading a
pickle runs code) is keyed by everything the result comes from: the float graph and both sample
sets (the model's file or folder bytes, the samples' pickled bytes), the precision, the base configuration (a `sqnr:DB` plan's search
costs on it), the `--input` files' bytes, and qsim's version and source digest
(qsim.cluster.distributed.code_identity), so any change of code or data misses and quantizes
again. A cached result is the very object the quantization returned, pickled: the same integers.
"""
from __future__ import annotations

import copyreg
import hashlib
import io
import os
import pickle
import types
from pathlib import Path
from typing import Callable

from ..cachedir import private_folder
from ..cluster.distributed import code_identity


def variant_key(model_path: Path, calib, evaluation, precision: str, config_spec: str,
                input_specs: list[str] | None) -> str:
    digest = hashlib.sha256()
    for part in (code_identity()[:2], precision, config_spec, tuple(input_specs or ())):
        digest.update(repr(part).encode() + b"\0")
    for path in _files(Path(model_path)):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode())
        digest.update(data)
    for value in (calib, evaluation):
        data = _dumps(value)
        digest.update(f"{len(data)}\0".encode())
        digest.update(data)
    for spec in input_specs or ():
        path = Path(spec.partition("=")[2] or spec)
        digest.update(path.read_bytes() if path.is_file() else b"-")
    return digest.hexdigest()[:32]


def _files(path: Path) -> list[Path]:
    """A model's files: the file, or every file of its folder (an NNEF model), in name order."""
    if path.is_dir():
        return sorted((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.relative_to(path).as_posix())
    return [path]


def _read_only_view(mapping: dict) -> types.MappingProxyType:
    return types.MappingProxyType(mapping)


class _Pickler(pickle.Pickler):
    # a graph's tensors are a read-only view of its dict (ir.Graph): pickled as the view of a copy
    dispatch_table = {**copyreg.dispatch_table,
                      types.MappingProxyType: lambda view: (_read_only_view, (dict(view),))}


def _dumps(value) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


def cached_variant(key: str, make: Callable[[], object]):
    """make()'s result, read from the cache when an entry for `key` is there, else made and
    stored (whole or not at all: written aside, then renamed)."""
    path = private_folder("explore", "explore quantization cache") / f"{key}.pickle"
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass
    value = make()
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_bytes(_dumps(value))
    os.replace(partial, path)
    return value
