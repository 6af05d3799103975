"""The backends that compute integer operators (the same bits either way). Its own module so that
naming a backend loads no compiled extension (qsim.kernels.dispatch and the registry do)."""
from __future__ import annotations

import enum


class Backend(enum.StrEnum):
    """A str enum: the dialect runners compare the backend with these strings."""
    KERNELS = "kernels"         # the compiled Cython kernels
    REFERENCE = "reference"     # the numpy transcription of the spec pseudocode


BACKENDS = tuple(backend.value for backend in Backend)
