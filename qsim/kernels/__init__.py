"""Compiled Cython kernels (built by setup.py from the top-level kernels/ folder).

`qsim.kernels._<name>` are the extension modules, loaded and checked by
`extensions.extension` (a missing or broken build raises KernelsUnavailableError); this
package holds their Python-side dispatch.
"""
