"""TOSA 0.30 integer operators: signatures, validation, shape inference, numpy reference.

`run(op, inputs, attrs, backend="kernels"|"reference")` runs one operator (docs/tosa.md; the
compiled backend is registered by qsim.kernels, which qsim's package import loads); `OPERATORS` maps spec
names to their definitions; importing this package registers every operator as the ir
op kind "tosa.<NAME>" with a verifier, and the SkriptND text form (sknd_form.py) with the
front end, so a loaded TOSA model comes back in the form the verifiers check.
"""
from . import (activation, comparison, control_flow, convolution, data_layout, data_nodes,  # noqa: F401
               elementwise_binary, elementwise_unary, image, pooling, reduction, scatter_gather,
               type_conversion)
from . import sknd_form  # noqa: F401  (registers the text form with the front end)
from .run import operator, run
from .signature import OPERATORS, OperatorDef
from .verify import register_kinds

register_kinds()

__all__ = ["run", "operator", "OPERATORS", "OperatorDef"]
