"""TFLite front end: a .tflite flatbuffer (model.py reads it with bounds checks, flatbuf.py)
as a float ir.Graph (load.py, context.py, convert_*.py) whose quantized tensors carry their
TFLite parameters as annotations."""
from .load import load_tflite
from .model import activation_bits, is_tflite

__all__ = ["activation_bits", "load_tflite", "is_tflite"]
