"""TFLite's integer arithmetic in TOSA 0.30 operators, for tensors whose parameters came from a
.tflite model (QuantInfo.source "tflite"): the formulas (arith.py, fixedpoint.py) and the
lowerings qsim's own rules hand such operands to (rules_add.py, rules_softmax.py)."""
