"""The TOSA 0.30 operators, one module per section of the spec's chapter 2 (tensor operators,
activations, elementwise binary and unary, comparison, reduction, data layout, scatter/gather,
image, type conversion, data nodes, control flow): each defines its operators' argument and
data-type tables, ERROR_IF checks, shape inference and numpy reference with `signature.define`.
Importing this package registers them all in `signature.OPERATORS`."""
from . import (activation, comparison, control_flow, convolution, data_layout, data_nodes,  # noqa: F401
               elementwise_binary, elementwise_unary, image, pooling, reduction, scatter_gather,
               type_conversion)
