"""Compiled Cython kernels (built by setup.py from the top-level kernels/ folder).

`qsim.kernels._<name>` are the extension modules, loaded and checked by
`extensions.extension` (a missing or broken build raises KernelsUnavailableError); this
package holds their Python-side dispatch. Importing it makes qsim.tosa.run's
backend="kernels" available (no extension is loaded until a kernel runs).
"""
from . import dispatch  # noqa: F401  (registers backend="kernels" with qsim.tosa.run)
