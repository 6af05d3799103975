"""What a `qsim quantize` report of an ONNX QDQ model scores against, said in words.

A QDQ model arrives as a float graph (its QuantizeLinear/DequantizeLinear pairs removed, their
parameters kept as annotations: onnx/qdq.py), and by default the report compares the integer
model with that dequantized graph. It can differ from the user's float model: onnxruntime's
quantize_static removes the ReLUs before its pairs (onnx/qdq.py folded_activation_warnings
finds them). `--float-model MODEL.onnx` scores against the float model instead; its inputs and
outputs must be the QDQ model's (names and shapes), or the comparison would mean nothing.
"""
from __future__ import annotations

from pathlib import Path

from .. import ir
from ..errors import UsageError

DEQUANTIZED = ("the QDQ model's dequantized graph (its QuantizeLinear/DequantizeLinear pairs removed), "
               "not necessarily the float model it came from")


def is_qdq_model(path: Path) -> bool:
    from ..onnx.protobuf import read_model   # deferred: onnx, for ONNX models only (docs/architecture.md)
    from ..onnx.qdq import has_qdq           # deferred: the same
    return path.suffix.lower() == ".onnx" and path.is_file() and has_qdq(read_model(str(path)))


def scored_against(model_path: Path, float_model: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(what the report scores against, in words, or None for an ordinary float model; the
    warnings that go with it)."""
    if float_model is not None:
        return f"the float model {float_model} (--float-model)", ()
    if not is_qdq_model(model_path):
        return None, ()
    from ..onnx.protobuf import read_model   # deferred: onnx, for ONNX models only
    from ..onnx.qdq import folded_activation_warnings   # deferred: the same
    return DEQUANTIZED, tuple(folded_activation_warnings(read_model(str(model_path))))


def check_reference(reference: ir.Graph, graph: ir.Graph, float_model: str) -> None:
    """A UsageError unless `reference` has `graph`'s inputs and outputs (names, shapes)."""
    def signature(g: ir.Graph, names) -> list[tuple[str, tuple]]:
        return [(n, tuple(g.tensor(n).shape)) for n in names]

    for what in ("inputs", "outputs"):
        mine, theirs = signature(graph, getattr(graph, what)), signature(reference, getattr(reference, what))
        if sorted(mine) != sorted(theirs):
            raise UsageError(f"--float-model {float_model}: its {what} {_listed(theirs)} are not the quantized "
                             f"model's {_listed(mine)}",
                             hint="pass the float model the QDQ model was made from (same input and output "
                                  "names and shapes)")


def _listed(signature) -> str:
    return ", ".join(f"'{n}' {list(shape)}" for n, shape in signature)
