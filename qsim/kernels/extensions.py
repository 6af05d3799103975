"""The compiled extension modules (qsim.kernels._cpu, _tosa_ops, _cvm_conv, _quant_ops,
_float_ops, _task_pool), loaded and checked.

A missing or broken build is an error, never a silent switch to the numpy reference: a
"kernels" run that quietly computed on the reference would make every kernels-vs-reference
comparison compare the reference with itself. `extension(name)` imports the module, checks
that it has every entry point this version of qsim calls (a stale build from older sources
lacks some), and otherwise raises KernelsUnavailableError with how to rebuild.

KernelsUnavailableError is deliberately not an ImportError: code that treats an ImportError
as "optional part absent" must not swallow it.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import UnsupportedError

# entry points per extension module (kernels/<name>.pyx without the leading underscore)
REQUIRED: dict[str, tuple[str, ...]] = {
    "_cpu": ("features",),
    "_tosa_ops": ("ISA_PORTABLE", "ISA_AVX2", "ISA_AVX512VNNI", "ISA_AVX512AMX", "EW_RANK", "pack_weights",
                  "pack_matrices_kn", "matmul_i8", "prepare_input_u8", "row_sums", "gemm", "gemm_i16", "pack_i16", "depthwise",
                  "max_pool", "avg_pool", "rescale", "table_i8", "table_i16", "clamp", "elementwise",
                  "reduce"),
    "_cvm_conv": ("conv2d", "dense"),
    "_quant_ops": ("round_passes", "scan_f32", "add_bin_counts_f32", "row_sums_f64",
                   "add_clipped_histogram", "conv_patches_f32",
                   "depthwise_moments_f32", "scan_bins_f32", "channel_sums_f32", "add_error_stats",
                   "STATS_SIGNATURES"),
    "_float_ops": ("depthwise_nchw_f32", "bounded_f32", "gemm_pack_a_f32", "conv_gemm_f32",
                   "gemm_scratch_floats", "gemm_prepack_f32", "scratch_per_thread", "max_pool_f32",
                   "copy_planes_f32"),
    "_task_pool": ("RUN", "set_spin_us", "workers_started", "inline_jobs", "parts_by_workers", "record_parts", "part_bounds"),
}

REBUILD_HINT = ("rebuild the compiled kernels: `pip install .` (or `pip install -e .`), or in a "
                "source tree `python setup.py build_ext --inplace` (needs Cython, numpy and a C "
                "compiler); run with backend='reference' (CLI: --backend reference) to use the "
                "numpy reference instead")


class KernelsUnavailableError(UnsupportedError):
    """The "kernels" backend cannot run: its compiled extension is missing or broken."""


_loaded: dict[str, ModuleType] = {}


def extension(name: str) -> ModuleType:
    """The checked extension module `qsim.kernels.<name>` (e.g. "_tosa_ops")."""
    module = _loaded.get(name)
    if module is not None:
        return module
    qualified = f"qsim.kernels.{name}"
    try:
        module = importlib.import_module(qualified)
    except ImportError as err:
        raise KernelsUnavailableError(
            f"the compiled kernels are missing or broken: importing {qualified} failed ({err})",
            hint=REBUILD_HINT) from err
    missing = [entry for entry in REQUIRED[name] if not hasattr(module, entry)]
    if missing:
        raise KernelsUnavailableError(
            f"the compiled kernels are out of date: {qualified} ({getattr(module, '__file__', '?')}) "
            f"lacks {', '.join(missing)}, which this qsim calls", hint=REBUILD_HINT)
    _loaded[name] = module
    return module


def load_all() -> list[ModuleType]:
    """Every extension module, checked (for `qsim selftest`: fail before any check runs)."""
    return [extension(name) for name in REQUIRED]
