"""Real exporter output: PyTorch's TorchScript exporter (torch.onnx.export, dynamo=False) writes
MTCNN's RNet, a SqueezeNet fire module, a ShuffleNetV2 unit and a torch.nn.TransformerEncoder
at several opsets; qsim.onnx loads them, folds their shape arithmetic, and agrees with
onnxruntime within the first-order bound of test_onnx_blocks (2·γ_n·S, S from the |x|, |W|,
batch-norm-mean-0 model). The exports are files in tests/onnx/torch_exports/, written by its
make_exports.py (torch is no qsim dependency, so the tests read the files)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_helpers import abs_block, assert_within, gamma, run_ort, run_qsim

EXPORTS = Path(__file__).resolve().parent / "torch_exports"


def exported(name: str, opset: int) -> tuple[onnx.ModelProto, str]:
    path = EXPORTS / f"{name}_opset{opset}.onnx"
    return onnx.load(str(path)), str(path)


@pytest.mark.parametrize("opset", [11, 17])
@pytest.mark.parametrize("name, shape, terms", [
    ("rnet", (2, 3, 24, 24), 27 + 252 + 192 + 576 + 128 + 8),
    ("fire", (2, 3, 12, 12), 3 + 36 + 4),
    ("shuffle", (2, 8, 6, 6), 4 + 9 + 4),
])
def test_torch_export_matches_onnxruntime(name, shape, terms, opset):
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    model, path = exported(name, opset)
    got = run_qsim(path, {"x": x}, batch=shape[0])
    ref = run_ort(model, {"x": x})
    s = abs_block(model, {"x": x})
    for out in ref:
        assert_within(got[out], ref[out], 2 * gamma(terms) * s[out], f"{name}:{out}")
    import qsim.onnx
    kinds = {op.kind.name for op in qsim.onnx.load(path, batch=shape[0]).ops}
    assert not kinds & {"layout.shape", "layout.gather", "layout.cast"}, kinds   # shape arithmetic folded


def test_torch_transformer_encoder_loads_and_matches():
    x = np.random.default_rng(1).normal(size=(2, 5, 16)).astype(np.float32)
    model, path = exported("encoder", 17)
    got = run_qsim(path, {"x": x}, batch=2)
    ref = run_ort(model, {"x": x})
    import qsim.onnx
    kinds = {op.kind.name for op in qsim.onnx.load(path, batch=2).ops}
    assert "layout.gather" not in kinds and "math.mod" not in kinds, kinds
    # the bound of test_onnx_blocks.test_transformer_encoder_layer: 2·γ_150·S·(2·max|g|/σ_min)²
    # with S and σ_min from the layer norms' inputs (onnxruntime's values; torch's g = 1)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    norm_inputs = [n.input[0] for n in model.graph.node if n.op_type == "LayerNormalization"]
    assert len(norm_inputs) == 2
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in norm_inputs)
    r = list(run_ort(probe, {"x": x}).values())
    sigma_min = min(float(np.sqrt(np.var(v, axis=-1)).min()) for v in r)
    s = max(float(np.abs(v).max()) for v in r) * 4
    for out in ref:
        assert_within(got[out], ref[out], 2 * gamma(150) * s * (2 / sigma_min) ** 2, out)
