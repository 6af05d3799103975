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
            # the C headers hold most kernel code: rebuild when one changes
            depends=sorted(glob.glob(os.path.join("kernels", "*.h"))),
            include_dirs=[numpy.get_include(), os.path.join(HERE, "kernels")],
            extra_compile_args=extra_compile,
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


setup(
    packages=packages(),
    package_dir={"qsim.stdlib": "stdlib", "qsim.hw": "hw"},
    package_data={
        "qsim.stdlib": ["*.sknd", "*.md"],
        "qsim.skriptnd": ["*.lark"],
        "qsim.nnef1": ["*.lark"],
        "qsim.zoo": ["**/*"],
        "qsim.hw": ["*.md"],
        "qsim.npu": ["*.cpp"],
        "qsim.kernels": ["*.h", "*.pxd"],
    },
    ext_modules=kernel_extensions(),
)
