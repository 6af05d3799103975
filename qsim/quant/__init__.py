"""Quantization: float graph -> bit-exact integer graph, for one of two targets.

One obvious place for each thing (docs/architecture.md, "quant/ by concern"):
- pipeline.py: the pipeline (calibrate -> lower -> evaluate, in memory), with the constant
  folding (fold_constants.py) and rebatching (rebatch.py) it applies;
- options.py: what a user chooses (QuantizeOptions); params.py: the schemes, widths and
  parameter math (Precision, Granularity, QuantConfig, QuantScheme, quantize/dequantize);
- target.py: the Target interface every target implements, TargetKind and Calibration (what
  calibration hands a target); rules.py: the one registry of lowering rules, keyed by target;
- qmodel.py: the quantized-model folder (the model type on disk); accuracy.py: the figures;
- calibration/: observers, calibrate, calibration and evaluation samples (data.py), annotations;
- evaluation/: float vs integer evaluation and output scoring;
- lowering/: what both targets' lowerings share (the float side, the integer graph builder,
  float patterns, integer inputs);
- tosa/, cvm/: each target, its integer context and its rules; rounding/: adaptive weight
  rounding (the TOSA target's).
The `qsim quantize` command (reading files, writing the folder and report) is
qsim/commands/quantize.py; docs/quantize.md.
"""
