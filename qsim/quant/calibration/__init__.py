"""Calibration: the statistics of the float graph over sample data and the parameters chosen
from them (observers.py, calibrate.py), the samples themselves (data.py: arrays, image folders,
labels) and the parameters a model states itself (annotations.py: @quantize, graph.quant, QDQ)."""
