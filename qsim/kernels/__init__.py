"""Compiled Cython kernels (built by setup.py from the top-level kernels/ folder).

`qsim.kernels._<name>` are the extension modules, loaded and checked by
`extensions.extension` (a missing or broken build raises KernelsUnavailableError); this
package holds their Python-side dispatch. Importing it makes qsim.tosa.run's
backend="kernels" available (no extension is loaded until a kernel runs).
"""
from ..tosa.run import register_backend


def _kernels_backend(call):
    """qsim.tosa.run's backend="kernels": the call's compiled kernel (or its reference)."""
    from .dispatch import implementation    # deferred: loads the compiled extensions, which a
    return implementation(call, "kernels")  # missing build must refuse per call, not on import


register_backend("kernels", _kernels_backend)
