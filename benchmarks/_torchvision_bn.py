"""Deeper unseen architectures for the peer comparison (benchmarks/accuracy.py --models peer):
torchvision's ResNet-18 (named resnet18_bn: _architectures.py's resnet18 is a re-implementation with
batch-norm statistics drawn at random), GoogLeNet, DenseNet-121, RegNet-X-400MF, EfficientNet-B0, a small-width ConvNeXt
and a small ViT, plus a small UNet written here; random initialization (torchvision's own,
seeded), then every batch-norm's running statistics re-estimated on crops of the real
photographs bundled with scikit-image / scikit-learn (train-mode forward passes, cumulative
average, no gradient step), so that each layer sees activations of the spread a trained network
has. ConvNeXt and ViT have no batch-norm (layer norms): their random weights are used as they are.

Inputs are 112x112 crops (the 224x224 crops of benchmarks/_efficientnet.py averaged 2x2): a
quarter of the arithmetic, which two shared cores need. Small variants, said in each name:
ConvNeXt at widths 48-96-192-384 (ConvNeXt-Tiny: 96-192-384-768; depths 2-2-6-2 instead of
3-3-9-3); ViT with 4 layers, width 128, 4 heads, 16x16 patches (ViT-B/16: 12 layers, 768, 12
heads); the UNet has 3 levels, 16-32-64 channels, a 2-class per-pixel output.
"""
from __future__ import annotations

import io

import numpy as np

SMALL_IMAGE = (3, 112, 112)
BN_CROPS, BN_SEED = 64, 7
BN_BATCH = 16


def small_crops(n: int, seed: int) -> np.ndarray:
    """n crops of the photographs at 112x112: benchmarks/_efficientnet.py's 224x224 crops,
    preprocessed the same way, then averaged over 2x2 pixels."""
    from _efficientnet import photographs, preprocess, random_crops   # deferred: skimage, sklearn
    photos = photographs()
    x = preprocess(photos, random_crops(photos, n, np.random.default_rng(seed)))
    return x.reshape(n, 3, 112, 2, 112, 2).mean(axis=(3, 5)).astype(np.float32)


def _unet(torch):
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.d3 = block(3, 16), block(16, 32), block(32, 64)
            self.up2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
            self.u2 = block(64, 32)
            self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
            self.u1 = block(32, 16)
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(nn.functional.max_pool2d(a, 2))
            c = self.d3(nn.functional.max_pool2d(b, 2))
            b = self.u2(torch.cat([self.up2(c), b], 1))
            return self.head(self.u1(torch.cat([self.up1(b), a], 1)))

    return UNet()


def build_module(name: str):
    import torch
    import torchvision.models as tv
    from torchvision.models.convnext import CNBlockConfig
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    if name == "resnet18_bn":
        return tv.resnet18(weights=None)
    if name == "googlenet":
        return tv.googlenet(weights=None, aux_logits=False, init_weights=True, transform_input=False)
    if name == "densenet121":
        return tv.densenet121(weights=None)
    if name == "regnet_x_400mf":
        return tv.regnet_x_400mf(weights=None)
    if name == "efficientnet_b0":
        return tv.efficientnet_b0(weights=None)
    if name == "convnext_small_width":
        settings = [CNBlockConfig(48, 96, 2), CNBlockConfig(96, 192, 2), CNBlockConfig(192, 384, 6),
                    CNBlockConfig(384, None, 2)]
        return tv.convnext.ConvNeXt(settings, stochastic_depth_prob=0.0)
    if name == "vit_l4_w128":
        vit = VisionTransformer(image_size=112, patch_size=16, num_layers=4, num_heads=4, hidden_dim=128,
                                mlp_dim=512)
        # torchvision zero-initializes the classification head (logits 0 for every input, which any
        # quantizer reproduces exactly): random weights of the head's fan-in scale instead
        torch.nn.init.normal_(vit.heads.head.weight, std=128 ** -0.5)
        return vit
    if name == "unet_small":
        return _unet(torch)
    raise KeyError(name)


def reestimate_batch_norms(module, x: np.ndarray) -> None:
    """Each BatchNorm's running mean and variance: the cumulative average over `x` in batches
    of BN_BATCH (train-mode forward passes; no parameter changes)."""
    import torch
    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None             # cumulative moving average over every batch
    module.train()
    with torch.no_grad():
        for i in range(0, len(x), BN_BATCH):
            module(torch.from_numpy(x[i:i + BN_BATCH]))
    module.eval()


def export(name: str):
    import onnx
    import torch
    module = build_module(name)
    reestimate_batch_norms(module, small_crops(BN_CROPS, BN_SEED))
    buf = io.BytesIO()
    torch.onnx.export(module, (torch.zeros(1, *SMALL_IMAGE),), buf, input_names=["x"],
                      output_names=["segmentation" if name.startswith("unet") else "logits"],
                      opset_version=17, dynamo=False, dynamic_axes={"x": {0: "N"}})
    return onnx.load_from_string(buf.getvalue())


NAMES = ("resnet18_bn", "googlenet", "densenet121", "regnet_x_400mf", "efficientnet_b0", "convnext_small_width",
         "vit_l4_w128", "unet_small")


def architectures(make):
    """{name: make(name, input_shape, weights, build)} for every model here."""
    weights = "random (torchvision init), batch-norm statistics re-estimated on photographs"
    return {n: make(n, SMALL_IMAGE, weights if n not in ("convnext_small_width", "vit_l4_w128") else
                    "random (torchvision init; layer norms, no batch-norm)", lambda n=n: export(n))
            for n in NAMES}
