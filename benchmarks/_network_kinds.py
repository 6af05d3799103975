"""The networks of issue 29 for benchmarks/models.py, as a user's torch.onnx export writes them:
a two-input CNN (an image and a feature vector), a transformer encoder with a padding mask
(src_key_padding_mask, a bool input), a Conv1d keyword-spotting network on MFCC frames, ESPCN
(super-resolution with nn.PixelShuffle: DepthToSpace), a Vision Transformer from torchvision
(torchvision.models.VisionTransformer, small configuration: image 64, patch 16, hidden 64, 2
layers: the class token is a constant concatenated in front of the patch tokens) and a UNet
whose decoder upsamples with ConvTranspose2d.

Weights are RANDOM (seeded PyTorch initialization, batch norms drawn around the identity; the
ViT's zero-initialized head drawn like a linear layer so that its output is not constant, its
class token and position embeddings drawn at the patch tokens' scale as trained ones are): the
flow, the bit-exactness and the float/integer agreement are measured, not task accuracy. Inputs
are seeded N(0, 1) samples (images, features, MFCC frames, embeddings), padding masks with 0-5
padded positions at the end of each row.
"""
from __future__ import annotations

import io

import numpy as np

from _architectures import Architecture, _randomize_batch_norms, _torch


def padded_encoder(width: int = 64, heads: int = 4, feedforward: int = 128, classes: int = 10):
    """x [N, S, width] and its padding mask [N, S] (bool, True: a padded position) → a 2-layer
    batch_first nn.TransformerEncoder with src_key_padding_mask → mean over positions → logits.
    Also the generator of tests/onnx/torch_exports/encoder_padding_mask_opset17.onnx (width 16)."""
    nn = _torch().nn

    class PaddedEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(width, heads, feedforward, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(width, classes)

        def forward(self, x, mask):
            return self.head(self.encoder(x, src_key_padding_mask=mask).mean(1))

    return PaddedEncoder()


def _modules():
    torch = _torch()
    nn = torch.nn

    class TwoInputCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.image = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                                       nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
                                       nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.features = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
            self.head = nn.Linear(64, 10)

        def forward(self, image, features):
            return self.head(torch.cat([self.image(image), self.features(features)], 1))

    class KeywordConv1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv1d(40, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU(),
                                      nn.MaxPool1d(2), nn.Conv1d(64, 64, 3, 2, 1), nn.BatchNorm1d(64), nn.ReLU(),
                                      nn.AvgPool1d(2), nn.Conv1d(64, 64, 3, padding=1), nn.BatchNorm1d(64),
                                      nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 12))

        def forward(self, x):
            return self.body(x)

    class ESPCN(nn.Module):
        def __init__(self, scale=3):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(), nn.Conv2d(64, 32, 3, padding=1),
                                      nn.Tanh(), nn.Conv2d(32, scale * scale, 3, padding=1), nn.PixelShuffle(scale))

        def forward(self, x):
            return self.body(x)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            def block(cin, cout):
                return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                                     nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())
            self.enc1, self.enc2, self.mid = block(3, 16), block(16, 32), block(32, 64)
            self.up2, self.dec2 = nn.ConvTranspose2d(64, 32, 2, 2), block(64, 32)
            self.up1, self.dec1 = nn.ConvTranspose2d(32, 16, 2, 2), block(32, 16)
            self.out = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
            m = self.mid(nn.functional.max_pool2d(e2, 2))
            d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
            return self.out(self.dec1(torch.cat([self.up1(d2), e1], 1)))

    def vit():
        import torchvision   # deferred: benchmark-only dependency
        model = torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=2,
                                                     hidden_dim=64, mlp_dim=128, num_classes=10)
        nn.init.normal_(model.heads.head.weight, std=64 ** -0.5)   # torchvision zeroes the head
        # torchvision starts the class token at 0 and the position embeddings at std 0.02: the
        # class token's row then has a tiny spread that the first LayerNorm divides by (int8
        # output SQNR 11 dB, top-1 agreement 87.5 % measured that way); trained ones are of the
        # patch tokens' size, which these draws imitate
        nn.init.normal_(model.class_token, std=0.5)
        nn.init.normal_(model.encoder.pos_embedding, std=0.5)
        return model

    return {"two_input_cnn": TwoInputCNN, "transformer_padding_mask": padded_encoder,
            "conv1d_kws": KeywordConv1d, "espcn": ESPCN, "vit_small": vit, "unet": UNet}


INPUTS = {
    "two_input_cnn": {"image": (3, 64, 64), "features": (16,)},
    "transformer_padding_mask": {"x": (16, 64), "mask": (16,)},
    "conv1d_kws": {"mfcc": (40, 98)},
    "espcn": {"x": (1, 64, 64)},
    "vit_small": {"x": (3, 64, 64)},
    "unet": {"x": (3, 64, 64)},
}


def export(name: str, seed: int = 0):
    import onnx   # deferred: benchmark-only dependency
    torch = _torch()
    torch.manual_seed(seed)
    module = _modules()[name]().eval()
    _randomize_batch_norms(module, seed)
    example = tuple(torch.from_numpy(a[:1]) for a in samples(name, 1, seed).values())
    names = list(INPUTS[name])
    buf = io.BytesIO()
    torch.onnx.export(module, example, buf, input_names=names, output_names=["y"], opset_version=17,
                      dynamo=False, dynamic_axes={**{n: {0: "N"} for n in names}, "y": {0: "N"}})
    return onnx.load_from_string(buf.getvalue())


def samples(name: str, n: int, seed: int) -> dict[str, np.ndarray]:
    """n seeded samples of every input of `name` (module doc)."""
    rng = np.random.default_rng(seed)
    out = {}
    for key, shape in INPUTS[name].items():
        if key == "mask":
            out[key] = np.arange(shape[0])[None, :] >= (shape[0] - rng.integers(0, 6, n))[:, None]
        else:
            out[key] = rng.normal(size=(n, *shape)).astype(np.float32)
    return out


NETWORK_KINDS = {name: Architecture(name, tuple(INPUTS[name].values()) if len(INPUTS[name]) > 1
                                    else next(iter(INPUTS[name].values())),
                                    "random", lambda name=name: export(name)) for name in INPUTS}
