"""Quantization: float graph -> bit-exact integer graph, for one of two targets.

- algorithms: scale math (scale.py), calibration observers (observers.py, calibrate.py),
  parameter choice (params.py), TABLE generation (tables.py), adaptive weight rounding
  (rounding.py; its inputs' patch geometry conv_geometry.py, their moments by tap offset
  offset_moments.py), annotations (annotations.py);
- the pipeline (pipeline.py: calibrate -> lower -> evaluate, in memory; evaluate.py,
  accuracy.py for its results);
- targets (target.py: TargetKind, the Target interface; target_tosa.py, target_cvm.py) with
  their rules (rules.py: one registry keyed by target; rules_tosa_*.py, rules_cvm.py), their
  integer contexts (tosa_context.py, cvm_context.py) and the float side both share
  (float_side.py, float_patterns.py, graph_builder.py);
- the quantized-model folder format (qmodel.py) and calibration samples (data.py).
The `qsim quantize` command (reading files, writing the folder and report) is
qsim/commands/quantize.py; docs/quantize.md.
"""
