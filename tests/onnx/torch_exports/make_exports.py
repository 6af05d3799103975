"""Writes tests/onnx/torch_exports/*.onnx: real PyTorch (TorchScript exporter, dynamo=False)
exports of MTCNN's RNet, a SqueezeNet fire module and a ShuffleNetV2 unit at opsets 11 and 17, and
a torch.nn.TransformerEncoder (GELU, 2 heads) at opset 17, its sequence-first
(batch_first=False) forms (ReLU post-norm; GELU pre-norm), causal-masked forms (mask argument,
is_causal=True), an nn.Embedding on int64 token ids feeding an encoder, with seeded weights, and a fake-quantized
(QAT-style) conv + linear model whose export carries QuantizeLinear/DequantizeLinear pairs
(fake_quant_qdq_opset17.onnx, for tests/onnx/test_qdq.py), and a 2-layer encoder with a
src_key_padding_mask input (encoder_padding_mask_opset17.onnx, for tests/quant/test_multi_input.py).
The tests load
these files, so they need no torch; run this script (with torch installed) to regenerate them:

    python tests/onnx/torch_exports/make_exports.py
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import onnx
import torch

nn = torch.nn
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "benchmarks"))
from _network_kinds import padded_encoder  # noqa: E402  (the one definition, also benchmarks/models.py's)
# name -> (module factory, input shape, opsets)


def export(module, x: np.ndarray, opset: int, batch_axis: int = 0) -> onnx.ModelProto:
    torch.manual_seed(0)
    buf = io.BytesIO()
    # a batch axis that is not the first is named "batch" (how qsim.onnx tells it from other dimensions)
    torch.onnx.export(module.eval(), (torch.from_numpy(x),), buf, input_names=["x"], opset_version=opset,
                      dynamo=False, dynamic_axes={"x": {batch_axis: "N" if batch_axis == 0 else "batch"}})
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


def encoder():
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)


def encoder_seq_first():
    """The stock layout: batch_first=False ([S, N, E] input), ReLU, post-norm, 2 layers."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


def encoder_norm_first_gelu():
    """batch_first=False with norm_first=True (pre-norm) and activation="gelu", 2 layers."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", norm_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)


class CausalEncoder(nn.Module):
    """batch_first, 1 layer, ReLU, with a causal mask: generate_square_subsequent_mask (a 0/-inf
    constant after folding) or, with `flag`, also is_causal=True (the mask made inside attention)."""

    def __init__(self, flag: bool):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder, self.flag = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False), flag

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.encoder(x, mask=mask, is_causal=self.flag)


class EmbeddingEncoder(nn.Module):
    """Token ids (int64 input [N, 6]) → nn.Embedding(20, 16) → 1 encoder layer → mean → 3 logits."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(20, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, 3)

    def forward(self, ids):
        return self.head(self.encoder(self.embedding(ids)).mean(1))


MODELS = {"rnet": (RNet, (2, 3, 24, 24), (11, 17)), "fire": (Fire, (2, 3, 12, 12), (11, 17)),
          "shuffle": (ShuffleUnit, (2, 8, 6, 6), (11, 17)), "encoder": (encoder, (2, 5, 16), (17,)),
          "encoder_causal_mask": (lambda: CausalEncoder(False), (2, 5, 16), (17,)),
          "encoder_is_causal": (lambda: CausalEncoder(True), (2, 5, 16), (17,))}
# integer (token id) inputs: name -> (factory, input shape, opsets)
INTEGER_INPUTS = {"embedding_encoder": (EmbeddingEncoder, (2, 6), (17,))}
# sequence-first exports: name -> (factory, input shape [S, N, E], opsets); the batch is axis 1
SEQ_FIRST = {"encoder_seq_first": (encoder_seq_first, (5, 2, 16), (17,)),
             "encoder_norm_first_gelu": (encoder_norm_first_gelu, (5, 2, 16), (17,))}


class FakeQuant(nn.Module):
    """Fake quantization as PyTorch's QAT writes it: per-tensor activations, per-channel weights,
    float biases, a Relu between the conv and its pair."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        fq, fqc = torch.fake_quantize_per_tensor_affine, torch.fake_quantize_per_channel_affine
        x = fq(x, 0.03, 0, -128, 127)
        w = fqc(self.conv.weight, torch.full((4,), 0.01), torch.zeros(4, dtype=torch.int32), 0, -128, 127)
        y = fq(torch.relu(nn.functional.conv2d(x, w, self.conv.bias, padding=1)), 0.02, -128, -128, 127)
        w2 = fqc(self.fc.weight, torch.full((5,), 0.005), torch.zeros(5, dtype=torch.int32), 0, -128, 127)
        return fq(nn.functional.linear(y.flatten(1), w2, self.fc.bias), 0.05, 3, -128, 127)


def fake_quant_export() -> None:
    torch.manual_seed(0)
    path = HERE / "fake_quant_qdq_opset17.onnx"
    torch.onnx.export(FakeQuant().eval(), torch.randn(1, 3, 6, 6), str(path), opset_version=17, dynamo=False,
                      input_names=["x"], output_names=["y"])
    print(f"wrote {path.name}")


def padding_mask_export() -> None:
    torch.manual_seed(0)
    path = HERE / "encoder_padding_mask_opset17.onnx"
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[:, 6:] = True
    module = padded_encoder(16, 2, 32, classes=4).eval()     # x [N, 8, 16], mask [N, 8] → 4 logits
    torch.onnx.export(module, (torch.randn(2, 8, 16), mask), str(path), opset_version=17, dynamo=False,
                      input_names=["x", "mask"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "mask": {0: "N"}, "y": {0: "N"}})
    print(f"wrote {path.name}")


def main() -> None:
    # (models, input element type, batch axis)
    for table, dtype, batch_axis in ((MODELS, np.float32, 0), (INTEGER_INPUTS, np.int64, 0), (SEQ_FIRST, np.float32, 1)):
        for name, (factory, shape, opsets) in table.items():
            for opset in opsets:
                torch.manual_seed(0)
                model = export(factory(), np.zeros(shape, dtype), opset, batch_axis=batch_axis)
                onnx.save(model, HERE / f"{name}_opset{opset}.onnx")
                print(f"wrote {name}_opset{opset}.onnx")
    fake_quant_export()
    padding_mask_export()


if __name__ == "__main__":
    main()
