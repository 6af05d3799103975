"""What every target's lowering shares: the float side of a lowering (float_side.py: the float
graph, its parameters, the bound integer values; LoweredModel, the pipeline's result), the
integer graph builder (graph_builder.py), the float patterns the rules read (float_patterns.py,
layer_norm_pattern.py, softmax_mask.py) and integer (index) inputs (integer_inputs.py)."""
