"""ONNX front end: an ONNX model (protobuf, opsets 11-21) → the same float ir.Graph of NNEF 2.0
standard operators (NCHW) that the SkriptND and NNEF 1.0 front ends produce. Entry point:
`load(path, batch=1)`. docs/onnx.md lists the operator mapping and the decisions taken."""
from .loader import load

__all__ = ["load"]
