"""Smoke test of an installed qsim wheel: every command, on every model form, from outside the repo.

Run by .ci/run with the python of a fresh venv that has only the built wheel installed (and its
dependencies), in an empty temporary folder, so nothing can come from the source tree. Each step
checks the exit code and something the command must have produced; the NNEF 1.0 float run is
checked against a numpy convolution.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

import qsim
from qsim import zoo
from qsim.tensorfile import write_tensor

WORK = Path.cwd()
QSIM = [sys.executable, "-m", "qsim"]
failures: list[str] = []

NNEF1_GRAPH = """version 1.0;

graph net( input ) -> ( output )
{
    input = external(shape = [1, 2, 6, 6]);
    filter = variable(shape = [3, 2, 3, 3], label = 'conv1/filter');
    bias = variable(shape = [1, 3], label = 'conv1/bias');
    conv = conv(input, filter, bias);
    output = relu(conv);
}
"""


def qsim_cmd(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    run = subprocess.run(QSIM + list(args), cwd=WORK, capture_output=True, text=True)
    shown = " ".join(["qsim", *args])
    if run.returncode != expect or "Traceback" in run.stderr:
        failures.append(f"{shown}: exit {run.returncode} (expected {expect})\n{run.stdout[-2000:]}"
                        f"\n{run.stderr[-3000:]}")
        print(f"FAIL  {shown}", flush=True)
    else:
        print(f"ok    {shown}", flush=True)
    return run


def check(condition: bool, what: str) -> None:
    if not condition:
        failures.append(what)
        print(f"FAIL  {what}", flush=True)


def conv_relu(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NNEF conv with default (same-size 'auto') padding, stride 1, then relu, in float64."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    out = np.zeros((n, oc, h, wd))
    for i in range(h):
        for j in range(wd):
            patch = padded[:, :, i:i + kh, j:j + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w) + b.reshape(1, oc)
    return np.maximum(out, 0.0)


def main() -> int:
    installed = Path(qsim.__file__).resolve().parent
    check("site-packages" in str(installed), f"qsim imported from {installed}, not the wheel")
    print(f"qsim {qsim.__version__} from {installed}")

    qsim_cmd("--version")
    qsim_cmd("selftest")

    # NNEF 2.0 (SkriptND): the embedded model, as a folder and as its main.sknd
    sknd = Path(str(zoo.default_model().path))
    qsim_cmd("check", str(sknd))
    qsim_cmd("check", str(sknd / "main.sknd"))

    # NNEF 1.0: a folder, its graph.nnef, and a .tgz; float run checked against numpy
    rng = np.random.default_rng(0)
    model = WORK / "nnef1_model"
    (model / "conv1").mkdir(parents=True)
    (model / "graph.nnef").write_text(NNEF1_GRAPH)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((1, 3)).astype(np.float32)
    write_tensor(model / "conv1" / "filter.dat", w)
    write_tensor(model / "conv1" / "bias.dat", b)
    with tarfile.open(WORK / "nnef1_model.tgz", "w:gz") as tar:
        for path in sorted(model.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(model)), recursive=False)
    for form in (model, model / "graph.nnef", WORK / "nnef1_model.tgz"):
        qsim_cmd("check", str(form))
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    np.save(WORK / "x.npy", x)
    qsim_cmd("run", str(WORK / "nnef1_model.tgz"), "--input", "x.npy", "--output", "y.npy")
    if (WORK / "y.npy").exists():
        y = np.load(WORK / "y.npy")
        expected = conv_relu(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
        bound = 64 * np.finfo(np.float32).eps * (np.abs(expected).max() + 1)
        check(y.shape == expected.shape and np.abs(y - expected).max() <= bound,
              f"NNEF 1.0 float run differs from numpy: shape {y.shape}")

    # quantize: the embedded job (the README's first command, on the subset), an NNEF 1.0
    # model with calibration data, and the CVM target
    qsim_cmd("quantize", "-q", "--subset", "-o", "q")
    check((WORK / "q" / "main.sknd").is_file() and (WORK / "q" / "report.json").is_file(),
          "quantize wrote no main.sknd/report.json")
    np.save(WORK / "calib.npy", rng.standard_normal((16, 2, 6, 6)).astype(np.float32))
    qsim_cmd("quantize", str(model), "--calib", "calib.npy", "-q", "-o", "q_nnef1")
    qsim_cmd("quantize", "-q", "--subset", "--target", "cvm", "-o", "q_cvm")

    # run, simulate (default engine: Verilator, which needs the shipped harness), vectors, RTL
    image = zoo.test_subset()[0][:1]
    np.save(WORK / "image.npy", image)
    qsim_cmd("run", "q", "--input", "image.npy", "--output", "logits.npy")
    check((WORK / "logits.npy").is_file(), "run wrote no output")
    qsim_cmd("simulate", "q", "-q", "-o", "sim")
    report = WORK / "sim" / "report.json"
    check(report.is_file(), "simulate wrote no report.json")
    if report.is_file():
        check(json.loads(report.read_text()).get("all_verified") is True,
              "simulate report.json does not say all_verified")
    qsim_cmd("simulate", "q", "-q", "--engine", "model", "-o", "sim_model")
    qsim_cmd("export-vectors", "q", "--out", "vectors")
    check((WORK / "vectors" / "manifest.json").is_file(), "export-vectors wrote no manifest")
    qsim_cmd("export-rtl", "--config", "8x8", "--out", "rtl")
    check((WORK / "rtl" / "qsim_npu.v").is_file(), "export-rtl wrote no Verilog")

    # bad input: a clean message and exit 2, never a traceback
    qsim_cmd("check", "no_such_model", expect=2)
    # an output over the input model is refused, and the model is still there
    before = sorted((p.relative_to(model), p.read_bytes()) for p in model.rglob("*") if p.is_file())
    qsim_cmd("quantize", str(model), "--calib", "calib.npy", "-o", str(model), expect=2)
    after = sorted((p.relative_to(model), p.read_bytes()) for p in model.rglob("*") if p.is_file())
    check(before == after, "quantize -o MODEL changed the input model")

    if failures:
        print(f"\n{len(failures)} wheel smoke failures:", file=sys.stderr)
        for f in failures:
            print(f"- {f}", file=sys.stderr)
        return 1
    print("wheel smoke: every command ran from the installed wheel")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("QSIM_CACHE_DIR", str(WORK / ".cache"))
    sys.exit(main())
