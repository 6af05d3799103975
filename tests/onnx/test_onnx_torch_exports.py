"""Real exporter output: PyTorch's TorchScript exporter (torch.onnx.export, dynamo=False) writes
MTCNN's RNet, a SqueezeNet fire module, a ShuffleNetV2 unit and a torch.nn.TransformerEncoder
at several opsets; qsim.onnx loads them, folds their shape arithmetic, and agrees with
onnxruntime within the first-order bound of test_onnx_blocks (2·γ_n·S, S from the |x|, |W|,
batch-norm-mean-0 model). Skipped where torch is not installed (it is no qsim dependency)."""
from __future__ import annotations

import io

import numpy as np
import onnx
import pytest

from onnx_helpers import abs_block, assert_within, gamma, run_ort, run_qsim, save

torch = pytest.importorskip("torch", reason="needs torch to export models")
nn = torch.nn


def export(module, x: np.ndarray, opset: int) -> onnx.ModelProto:
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (torch.from_numpy(x),), buf, input_names=["x"], opset_version=opset,
                      dynamo=False, dynamic_axes={"x": {0: "N"}})
    return onnx.load_from_string(buf.getvalue())


class RNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 28, 3), nn.PReLU(28), nn.MaxPool2d(3, 2, ceil_mode=True),
                                      nn.Conv2d(28, 48, 3), nn.PReLU(48), nn.MaxPool2d(3, 2, ceil_mode=True),
                                      nn.Conv2d(48, 64, 2), nn.PReLU(64))
        self.fc, self.prelu = nn.Linear(64 * 3 * 3, 128), nn.PReLU(128)
        self.box = nn.Linear(128, 4)

    def forward(self, x):
        h = self.features(x).permute(0, 3, 2, 1).contiguous().view(x.shape[0], -1)
        return self.box(self.prelu(self.fc(h)))


class Fire(nn.Module):
    def __init__(self):
        super().__init__()
        self.squeeze, self.e1, self.e3 = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 8, 1), nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.squeeze(x)), 3, 2, ceil_mode=True)
        return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)


class ShuffleUnit(nn.Module):
    def __init__(self):
        super().__init__()
        self.branch = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, 1, 1, groups=4))

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        out = torch.cat((a, self.branch(b)), 1)
        n, c, h, w = out.size()
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


@pytest.mark.parametrize("opset", [11, 17])
@pytest.mark.parametrize("name, module, shape, terms", [
    ("rnet", RNet, (2, 3, 24, 24), 27 + 252 + 192 + 576 + 128 + 8),
    ("fire", Fire, (2, 3, 12, 12), 3 + 36 + 4),
    ("shuffle", ShuffleUnit, (2, 8, 6, 6), 4 + 9 + 4),
])
def test_torch_export_matches_onnxruntime(tmp_path, name, module, shape, terms, opset):
    torch.manual_seed(0)
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    model = export(module(), x, opset)
    path = save(model, tmp_path)
    got = run_qsim(path, {"x": x}, batch=shape[0])
    ref = run_ort(model, {"x": x})
    s = abs_block(model, {"x": x})
    for out in ref:
        assert_within(got[out], ref[out], 2 * gamma(terms) * s[out], f"{name}:{out}")
    import qsim.onnx
    kinds = {op.kind.name for op in qsim.onnx.load(path, batch=shape[0]).ops}
    assert not kinds & {"layout.shape", "layout.gather", "layout.cast"}, kinds   # shape arithmetic folded


def test_torch_transformer_encoder_loads_and_matches(tmp_path):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
    encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    x = np.random.default_rng(1).normal(size=(2, 5, 16)).astype(np.float32)
    model = export(encoder, x, 17)
    path = save(model, tmp_path)
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
