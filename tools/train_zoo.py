#!/usr/bin/env python3
"""Train qsim's embedded Fashion-MNIST CNN and export it as a float NNEF 2.0 model folder.

A repo tool, not part of the qsim package: it is the only place PyTorch is used
(`pip install torch==2.13.0`, the CPU wheel). It writes, under qsim/zoo/:

  fashion_cnn/main.sknd, fashion_cnn/*.dat   the float model (NCHW, stdlib operators only)
  fashion_mnist_calib.npz                    256 training images (uint8) for calibration
  fashion_mnist_test1k.npz                   the first 1000 test images (uint8) and labels
and under tests/zoo/:
  fashion_cnn_reference.npz                  PyTorch logits of the first 16 test images
                                             (float32 input = pixel / 255)

Data: Debian's `dataset-fashion-mnist` (/usr/share/datasets/fashion-mnist/, MIT license).
The run is deterministic (fixed seeds, one thread, deterministic algorithms):
running it again reproduces the committed files.

Usage: python tools/train_zoo.py [--epochs N] [--out-root REPO_ROOT] [--checkpoint FILE.npz]
(about 5 minutes on one core for the default 8 epochs)
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from qsim.zoo.fashion_mnist import (CALIBRATION_FILE, DEBIAN_DIR, TEST_SUBSET_FILE, preprocess,
                                    read_split)

SEED = 20240613
CALIB_COUNT = 256
TEST_SUBSET_COUNT = 1000
REFERENCE_COUNT = 16
BN_EPSILON = 1e-5
# (out_channels, stride) of the four conv+BN+ReLU stages; 3x3 kernels, padding 1.
STAGES = ((16, 1), (32, 2), (64, 2), (64, 2))
CLASSES = 10


def build_model(torch):
    nn = torch.nn
    layers = []
    in_ch = 1
    for out_ch, stride in STAGES:
        layers += [nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False),
                   nn.BatchNorm2d(out_ch, eps=BN_EPSILON), nn.ReLU()]
        in_ch = out_ch
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_ch, CLASSES)]
    return nn.Sequential(*layers)


def train(torch, model, images, labels, epochs: int, batch: int = 128):
    rng = np.random.default_rng(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    steps = epochs * (len(images) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    x_all = preprocess(images)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        t0 = time.time()
        order = rng.permutation(len(images))
        total = 0.0
        for k in range(len(images) // batch):
            idx = order[k * batch:(k + 1) * batch]
            xb = x_all[idx].copy()
            flip = rng.random(len(idx)) < 0.5          # horizontal-flip augmentation
            xb[flip] = xb[flip, :, :, ::-1]
            xt = torch.from_numpy(xb)
            yt = torch.from_numpy(labels[idx].astype(np.int64))
            opt.zero_grad()
            loss = loss_fn(model(xt), yt)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        print(f"epoch {epoch + 1}/{epochs}: loss {total / (len(images) // batch):.4f} "
              f"({time.time() - t0:.0f} s)", flush=True)
    model.eval()


def predict(torch, model, images_u8: np.ndarray, batch: int = 1000) -> np.ndarray:
    outs = []
    with torch.no_grad():
        for k in range(0, len(images_u8), batch):
            outs.append(model(torch.from_numpy(preprocess(images_u8[k:k + batch]))).numpy())
    return np.concatenate(outs)


def model_tensors(model) -> dict[str, np.ndarray]:
    """The float variables by their NNEF names (see write_sknd for how they are used)."""
    tensors = {}
    convs = [m for m in model if m.__class__.__name__ == "Conv2d"]
    bns = [m for m in model if m.__class__.__name__ == "BatchNorm2d"]
    for i, (conv, bn) in enumerate(zip(convs, bns), start=1):
        tensors[f"conv{i}_filter"] = conv.weight.detach().numpy()
        tensors[f"bn{i}_mean"] = bn.running_mean.detach().numpy()
        tensors[f"bn{i}_variance"] = bn.running_var.detach().numpy()
        tensors[f"bn{i}_bias"] = bn.bias.detach().numpy()
        tensors[f"bn{i}_scale"] = bn.weight.detach().numpy()
    linear = [m for m in model if m.__class__.__name__ == "Linear"][0]
    tensors["fc_filter"] = linear.weight.detach().numpy()
    tensors["fc_bias"] = linear.bias.detach().numpy()
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}


def sknd_text(tensors: dict[str, np.ndarray]) -> str:
    """main.sknd: NNEF 2.0 stdlib operators only (ch. 4), NCHW, graph-level variables.

    Padding is explicit (`padding` is the 2*d pack [front.., back..], 4.4.1) because the
    stdlib default is SAME with UPPER alignment, which differs from PyTorch's symmetric
    padding=1 at stride 2. Global average pool is math.mean_reduce over the spatial
    axes with squeeze (4.2.6), giving [batch, 64] for nn.linear.
    """
    def shape(name):
        return ", ".join(str(d) for d in tensors[name].shape)

    var_lines = [f"        {name}: real[{shape(name)}];" for name in tensors]
    body = []
    prev = "input"
    for i, (_, stride) in enumerate(STAGES, start=1):
        body.append(f"        conv{i} = nn.conv{{stride=[{stride}, {stride}], padding=[1, 1, 1, 1]}}"
                    f"({prev}, conv{i}_filter);")
        body.append(f"        bn{i} = nn.batch_norm{{epsilon={BN_EPSILON}}}"
                    f"(conv{i}, bn{i}_mean, bn{i}_variance, bn{i}_bias, bn{i}_scale);")
        body.append(f"        relu{i} = nn.relu(bn{i});")
        prev = f"relu{i}"
    body.append(f"        pool = math.mean_reduce{{axes=[2, 3], squeeze=true}}({prev});")
    body.append("        output = nn.linear(pool, fc_filter, fc_bias);")
    return "\n".join([
        "# Fashion-MNIST classifier, trained by tools/train_zoo.py (float32, NCHW).",
        "# Input: pixel / 255 as real[batch, 1, 28, 28]; output: logits of the 10 classes",
        "# (0 T-shirt/top, 1 Trouser, 2 Pullover, 3 Dress, 4 Coat, 5 Sandal, 6 Shirt,",
        "# 7 Sneaker, 8 Bag, 9 Ankle boot).",
        "import nn;",
        "import math;",
        "",
        "graph fashion_cnn {",
        "    @attrib {",
        "        batch: int = 1;",
        "    }",
        "    @input {",
        "        input: real[batch, 1, 28, 28];",
        "    }",
        "    @output {",
        f"        output: real[batch, {CLASSES}];",
        "    }",
        "    @variable {",
        *var_lines,
        "    }",
        "    @compose {",
        *body,
        "    }",
        "}",
        "",
    ])


def numpy_forward(tensors: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The exported graph's meaning, computed in float64 from the spec formulas (4.4.1,
    4.4.4, 4.2.6): an independent check that the export says what PyTorch computed."""
    h = x.astype(np.float64)
    for i, (_, stride) in enumerate(STAGES, start=1):
        w = tensors[f"conv{i}_filter"].astype(np.float64)
        n, c, kh, kw = w.shape
        p = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
        oh = (h.shape[2] + 2 - kh) // stride + 1
        ow = (h.shape[3] + 2 - kw) // stride + 1
        out = np.zeros((h.shape[0], n, oh, ow))
        for di in range(kh):
            for dj in range(kw):
                patch = p[:, :, di:di + stride * (oh - 1) + 1:stride, dj:dj + stride * (ow - 1) + 1:stride]
                out += np.einsum("bchw,nc->bnhw", patch, w[:, :, di, dj])
        g = lambda k: tensors[f"bn{i}_{k}"].astype(np.float64)[None, :, None, None]
        out = (out - g("mean")) / np.sqrt(g("variance") + BN_EPSILON) * g("scale") + g("bias")
        h = np.maximum(out, 0.0)
    pooled = h.mean(axis=(2, 3))
    return pooled @ tensors["fc_filter"].astype(np.float64).T + tensors["fc_bias"]


def save_npz(path: Path, **arrays) -> None:
    """np.savez_compressed through a temporary name, so a broken run leaves no half file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, path)


def export(tensors, out_root: Path, test_images, test_labels, train_images, ref_logits) -> None:
    from qsim.tensorfile import write_tensor   # the one .dat writer (NNEF 1.0 5.2)

    from qsim.atomic import atomic_directory

    with atomic_directory(out_root / "qsim" / "zoo" / "fashion_cnn") as tmp_dir:
        (tmp_dir / "main.sknd").write_text(sknd_text(tensors))
        for name, array in tensors.items():
            write_tensor(tmp_dir / f"{name}.dat", array)

    rng = np.random.default_rng(SEED + 1)
    calib_idx = np.sort(rng.choice(len(train_images), CALIB_COUNT, replace=False))
    zoo = out_root / "qsim" / "zoo"
    save_npz(zoo / CALIBRATION_FILE, images=train_images[calib_idx])
    save_npz(zoo / TEST_SUBSET_FILE, images=test_images[:TEST_SUBSET_COUNT],
             labels=test_labels[:TEST_SUBSET_COUNT])
    fixture_dir = out_root / "tests" / "zoo"
    fixture_dir.mkdir(parents=True, exist_ok=True)
    save_npz(fixture_dir / "fashion_cnn_reference.npz",
             images=test_images[:REFERENCE_COUNT], logits=ref_logits[:REFERENCE_COUNT])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--out-root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--no-export", action="store_true", help="train and evaluate only")
    parser.add_argument("--checkpoint", type=Path,
                        help="npz of trained tensors and test logits: written after training, "
                             "or, when it exists, read instead of training (export only)")
    args = parser.parse_args(argv)
    if not DEBIAN_DIR.is_dir():
        raise SystemExit(f"{DEBIAN_DIR} not found: apt-get install dataset-fashion-mnist")
    train_images, train_labels = read_split(DEBIAN_DIR, "train")
    test_images, test_labels = read_split(DEBIAN_DIR, "test")
    if args.checkpoint is not None and args.checkpoint.exists():
        saved = np.load(args.checkpoint)
        tensors = {k[2:]: saved[k] for k in saved.files if k.startswith("t:")}
        logits = saved["logits"]
        print(f"loaded {args.checkpoint}", flush=True)
    else:
        import torch

        torch.set_num_threads(1)      # the machine is shared; also keeps results reproducible
        torch.manual_seed(SEED)
        torch.use_deterministic_algorithms(True)
        model = build_model(torch)
        n_params = sum(p.numel() for p in model.parameters())
        print(f"parameters: {n_params}", flush=True)
        t0 = time.time()
        train(torch, model, train_images, train_labels, args.epochs)
        print(f"training: {time.time() - t0:.0f} s", flush=True)
        logits = predict(torch, model, test_images)
        tensors = model_tensors(model)
        if args.checkpoint is not None:
            save_npz(args.checkpoint, logits=logits, **{f"t:{k}": v for k, v in tensors.items()})
    accuracy = float(np.mean(logits.argmax(1) == test_labels))
    print(f"float top-1 on the 10k test set (PyTorch): {100 * accuracy:.2f} %")
    subset = float(np.mean(logits[:TEST_SUBSET_COUNT].argmax(1) == test_labels[:TEST_SUBSET_COUNT]))
    print(f"float top-1 on the first {TEST_SUBSET_COUNT} test images: {100 * subset:.2f} %")
    check = numpy_forward(tensors, preprocess(test_images[:256]))
    err = float(np.max(np.abs(check - logits[:256])))
    print(f"export check: max |numpy(spec formulas) - PyTorch| over 256 images = {err:.3g}")
    if err > 1e-3:
        raise SystemExit("exported tensors do not reproduce PyTorch's logits")
    if not args.no_export:
        export(tensors, args.out_root, test_images, test_labels, train_images, logits)
        print(f"exported to {args.out_root / 'qsim' / 'zoo'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
