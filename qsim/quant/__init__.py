"""Quantization: scale math (scale.py), calibration observers (observers.py), parameter
choice (params.py), TABLE generation for unary functions (tables.py).

The lowering float graph → TOSA integer graph builds on these; see docs/quantize.md.
"""
