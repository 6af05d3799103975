"""TOSA 0.30 integer operators: signatures, validation, shape inference, numpy reference.

`run(op, inputs, attrs, backend="kernels"|"reference")` runs one operator (docs/tosa.md; the
compiled backend is registered by qsim.kernels, which qsim's package import loads); `OPERATORS` maps spec
names to their definitions; importing this package registers every operator as the ir
op kind "tosa.<NAME>" with a verifier, and the SkriptND text form (sknd_form.py) with the
front end, so a loaded TOSA model comes back in the form the verifiers check.
"""
from . import ops  # noqa: F401  (defines every operator, one module per spec section)
from . import sknd_form  # noqa: F401  (registers the text form with the front end)
from .run import operator, run
from .signature import OPERATORS, OperatorDef
from .verify import register_kinds

register_kinds()

__all__ = ["run", "operator", "OPERATORS", "OperatorDef"]
