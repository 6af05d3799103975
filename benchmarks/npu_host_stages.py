"""Which layers of the model-matrix blocks (tests/models/model_blocks.py) and of the UNet-like and
embedding networks (tests/npu/unet_models.py) `qsim simulate` leaves on the host.

    python benchmarks/npu_host_stages.py [--work DIR]

Per model: built in code (seeded), `qsim quantize` on 16 seeded calibration samples, then the
NPU plan of `qsim simulate` on the 16x16 preset (qsim.npu.program.prepare_run: the stages with
every vector program compiled, so a vector mapping that fails at compile time shows as a host
stage too; the array layers are not run). Prints per model the stages per unit and the host
stages other than RESHAPE / IDENTITY / CONST with their reasons. No torch needed; the
benchmark architectures' host stages are in reports/vector_coverage.md
(benchmarks/vector_coverage.py).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "models"), str(HERE.parent / "tests" / "npu")]

import onnx  # noqa: E402

from model_blocks import BLOCKS  # noqa: E402
from unet_models import embedding, unet  # noqa: E402
from qsim.commands.quantize import quantize_to_folder  # noqa: E402
from qsim.npu.config import load_config  # noqa: E402
from qsim.npu.program import Unit, prepare_run  # noqa: E402
from qsim.quant.evaluation.evaluate import quantize_feed  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402
from qsim.quant.qmodel import load_quantized_model  # noqa: E402

FREE = ("RESHAPE", "IDENTITY", "CONST")


def host_stages(name: str, model: onnx.ModelProto, x: np.ndarray, work: Path) -> tuple[dict, list]:
    onnx.save(model, work / f"{name}.onnx")
    np.save(work / f"{name}.npy", x)
    quantize_to_folder(str(work / f"{name}.onnx"), str(work / f"{name}.npy"), str(work / name),
                       QuantizeOptions(show_progress=False))
    q = load_quantized_model(work / name)
    first = q.graph.inputs[0]
    feed = ({first: x[:1].astype(np.int32)} if x.dtype.kind == "i" else quantize_feed(q, {first: x[:1]}))
    prepared = prepare_run(q.graph, feed, load_config("16x16"), engine="model")
    units = {u.value: sum(1 for s in prepared.stages if s.unit is u) for u in Unit}
    return units, [(s.op_text, s.note) for s in prepared.stages if s.unit is Unit.HOST and s.op_text not in FREE]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=None, help="folder for the models (default: a temporary one)")
    args = parser.parse_args()
    models = {**{name: (build, "float") for name, build in BLOCKS.items()},
              "unet": (unet, "float"), "embedding": (embedding, "ids")}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for i, (name, (build, kind)) in enumerate(models.items()):
            model = build(np.random.default_rng(100 + i))
            shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])
            rng = np.random.default_rng(200 + i)
            x = rng.integers(0, 20, (16, *shape)) if kind == "ids" else rng.normal(size=(16, *shape)).astype(np.float32)
            units, host = host_stages(name, model, x, work)
            print(f"{name}: {units}; host arithmetic: {host or 'none'}", flush=True)


if __name__ == "__main__":
    main()
