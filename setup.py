"""Build: compiles every kernels/*.pyx into an extension module `qsim.kernels._<name>`.

stdlib/ (SkriptND modules) and hw/ (Amaranth HDL) live at the top of the repo
and ship inside the installed package as `qsim.stdlib` and `qsim.hw`.

SIMD: the C headers in kernels/ guard AVX2/AVX-512/VNNI code with
`__attribute__((target(...)))` and choose a path at load time with
`__builtin_cpu_supports`, so one build runs on any x86-64 machine and the
portable path gives the same bits (see docs/kernels.md).
"""
import glob
import os
import platform

import numpy
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def kernel_extensions():
    extra_compile = ["-O3", "-fno-strict-aliasing"]
    if platform.machine().lower() in ("x86_64", "amd64"):
        # Baseline stays plain x86-64; wider ISAs are enabled per function.
        extra_compile += ["-mtune=generic"]
    exts = []
    for pyx in sorted(glob.glob(os.path.join("kernels", "*.pyx"))):
        stem = os.path.splitext(os.path.basename(pyx))[0]
        exts.append(Extension(
            f"qsim.kernels._{stem}",
            sources=[pyx],
            # the C headers hold most kernel code: rebuild when one (or a shared .pxi) changes
            depends=sorted(glob.glob(os.path.join("kernels", "*.h")) + glob.glob(os.path.join("kernels", "*.pxi"))),
            include_dirs=[numpy.get_include(), os.path.join(HERE, "kernels")],
            # quant_ops and float_ops do float arithmetic whose rounding is defined: no contraction by
            # the compiler; the float convs' fused multiply-adds are explicit (docs/kernels.md, Bits)
            extra_compile_args=extra_compile + (["-ffp-contract=off"] if stem in ("quant_ops", "float_ops") else []),
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        ))
    return cythonize(exts, language_level=3, compiler_directives={
        "boundscheck": False, "wraparound": False, "cdivision": True,
        "initializedcheck": False,
    })


def packages():
    """qsim's packages, plus hw/ and stdlib/ mapped into it (with any subpackages)."""
    found = find_packages(include=["qsim", "qsim.*"])
    found += ["qsim.stdlib"]
    found += ["qsim.hw" + ("." + p if p else "") for p in [""] + find_packages("hw")]
    return found


# Files that are source or build products, never package data.
NOT_DATA = (".py", ".pyc", ".pyx", ".pxd", ".c", ".so", ".html")


def package_data(package_dirs: dict[str, str]) -> dict[str, list[str]]:
    """Every other file below each package's folder ships with it.

    Globbing by file kind once lost `qsim/nnef1/stdlib.nnef` from the wheel; walking the
    folders means a new data file ships without anyone remembering to list it (the grammars
    qsim/nnef1/nnef1.lark and qsim/skriptnd/skriptnd.lark, the NNEF 1.0 stdlib, the energy
    tables; tests/test_packaging.py checks the wheel's list). Sub-folders
    that are packages of their own are left to that package.
    """
    data = {}
    for package, folder in package_dirs.items():
        files = []
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not (
                root != folder and os.path.exists(os.path.join(root, d, "__init__.py"))))
            if root != folder and os.path.exists(os.path.join(root, "__init__.py")):
                dirs[:] = []
                continue
            files += [os.path.relpath(os.path.join(root, n), folder) for n in sorted(names)
                      if not n.endswith(NOT_DATA) and not n.startswith(".")]
        if files:
            data[package] = files
    return data


PACKAGE_DIRS = {"qsim.stdlib": "stdlib", "qsim.hw": "hw"}
# Files qsim cannot run without, named as well as walked: the front ends' grammars and the
# NNEF 1.0 standard library (the walk finds them too; naming them keeps them in package_data
# even if a folder rule above ever changes).
REQUIRED_DATA = {"qsim.nnef1": ["nnef1.lark", "stdlib.nnef"], "qsim.skriptnd": ["skriptnd.lark"]}


def with_required(data: dict[str, list[str]]) -> dict[str, list[str]]:
    for package, names in REQUIRED_DATA.items():
        data[package] = sorted(set(data.get(package, [])) | set(names))
    return data


ALL_PACKAGES = packages()
setup(
    packages=ALL_PACKAGES,
    package_dir=PACKAGE_DIRS,
    package_data=with_required(package_data({
        p: PACKAGE_DIRS.get(p, p.replace(".", "/")) for p in ALL_PACKAGES
        if not any(p.startswith(m + ".") for m in PACKAGE_DIRS)})),
    # QSIM_BUILD_NO_KERNELS=1 lays out the pure-Python package only (tests/test_packaging.py
    # checks what ships without spending a minute in Cython and the C compiler)
    ext_modules=[] if os.environ.get("QSIM_BUILD_NO_KERNELS") else kernel_extensions(),
)
