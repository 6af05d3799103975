"""Trains and writes the small transformer-encoder classifier of tests/quant/transformer/:

    encoder_classifier.onnx   Linear(8→32) → torch.nn.TransformerEncoder (2 layers, 4 heads,
                              feed-forward 64, relu, post-norm LayerNorm) → mean over the
                              sequence → Linear(32→4); TorchScript exporter, opset 17
    encoder_calib.npz         64 calibration sequences (x)
    encoder_eval.npz          400 evaluation sequences (x) with labels (y)

The task is generated here, deterministically (numpy seed 2026): six symbols are fixed random
unit vectors in R^8; a sequence of 12 tokens has class c in 0..3; each token is symbol c
with probability 0.55, else one of the five others, plus Gaussian noise (sigma 0.6). The class
is the generating symbol, so even the Bayes-optimal classifier errs (it reaches 88 %): float
top-1 is below 100 % and the int8 model's accuracy can be compared with it. Solving it takes
attention over the whole sequence (a per-token vote under heavy noise).

Needs torch (not a qsim dependency); the tests read the written files:

    python tests/quant/transformer/make_encoder_classifier.py [--eval-count N] [--out DIR]

`--eval-count 10000 --out /tmp/x` writes a larger evaluation set (and the same model) for
measurements.
"""
from __future__ import annotations

import argparse
import io
from pathlib import Path

import numpy as np
import onnx
import torch

HERE = Path(__file__).resolve().parent
SEQ, FEATURES, SYMBOLS, CLASSES = 12, 8, 6, 4
MAJOR, NOISE = 0.55, 0.6
D_MODEL, HEADS, FF, LAYERS = 32, 4, 64, 2


def symbols() -> np.ndarray:
    rng = np.random.default_rng(2026)
    v = rng.normal(size=(SYMBOLS, FEATURES))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def sequences(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` (x [count, SEQ, FEATURES] float32, labels [count] int64) from `seed`."""
    rng = np.random.default_rng(seed)
    proto = symbols()
    labels = rng.integers(0, CLASSES, size=count)
    others = rng.integers(0, SYMBOLS - 1, size=(count, SEQ))
    others = others + (others >= labels[:, None])            # any symbol but the class
    pick = np.where(rng.random((count, SEQ)) < MAJOR, labels[:, None], others)
    x = proto[pick] + NOISE * rng.normal(size=(count, SEQ, FEATURES))
    return x.astype(np.float32), labels.astype(np.int64)


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(FEATURES, D_MODEL)
        layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FF, dropout=0.0, activation="relu",
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = torch.nn.Linear(D_MODEL, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


def train(model: Classifier, x: np.ndarray, y: np.ndarray, epochs: int = 30) -> None:
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 128):
            idx = perm[i:i + 128]
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()


def accuracy(model: Classifier, x: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--eval-count", type=int, default=400)
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Classifier()
    x_train, y_train = sequences(40000, seed=1)
    x_eval, y_eval = sequences(args.eval_count, seed=2)
    x_calib, _ = sequences(64, seed=3)
    train(model, x_train, y_train)
    print(f"float top-1: train {accuracy(model, x_train, y_train):.4f}, "
          f"eval ({len(y_eval)}) {accuracy(model, x_eval, y_eval):.4f}")
    args.out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    torch.onnx.export(model.eval(), (torch.from_numpy(x_eval[:1]),), buf, input_names=["x"],
                      output_names=["logits"], opset_version=17, dynamo=False)
    onnx.save(onnx.load_from_string(buf.getvalue()), args.out / "encoder_classifier.onnx")
    np.savez(args.out / "encoder_eval.npz", x=x_eval, y=y_eval)
    np.savez(args.out / "encoder_calib.npz", x=x_calib)
    print(f"wrote {args.out}/encoder_classifier.onnx, encoder_eval.npz, encoder_calib.npz")


if __name__ == "__main__":
    main()
