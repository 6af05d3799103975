"""The fuzz targets by name: `TARGETS[name](rng, corpus) -> Case` and each target's share of a
mixed campaign (`WEIGHTS`). The generators live in targets.py (model texts, tensor files,
containers, NPU configurations) and in gen_*.py, one module per later family; this module only
names them, so no generator module needs to import the table."""
from __future__ import annotations

from .gen_area import gen_area_table
from .gen_cli import gen_cli
from .gen_multi_input import gen_multi_input
from .gen_onnx import gen_onnx
from .gen_qdq import gen_qdq
from .gen_robust import ROBUST_TARGETS
from .gen_scheduler import gen_scheduler
from .gen_tflite import gen_tflite
from .gen_space import gen_space
from .targets import gen_container, gen_dat, gen_nnef1, gen_npu_config, gen_quant, gen_sknd

TARGETS = {
    "sknd": gen_sknd,
    "nnef1": gen_nnef1,
    "dat": gen_dat,
    "quant": gen_quant,
    "container": gen_container,
    "cli": gen_cli,
    "npu-config": gen_npu_config,
    "onnx": gen_onnx,
    "qdq": gen_qdq,
    "scheduler": gen_scheduler,
    "multi-input": gen_multi_input,
    "tflite": gen_tflite,
    "area-table": gen_area_table,
    "explore-space": gen_space,
    **{name: gen for name, (gen, _) in ROBUST_TARGETS.items()},
}
# Share of the inputs each target gets when --targets names several (heavier targets less).
WEIGHTS = {"sknd": 20, "nnef1": 20, "dat": 20, "quant": 12, "container": 8, "cli": 7, "npu-config": 13,
           "onnx": 15, "qdq": 10, "scheduler": 5, "multi-input": 5, "tflite": 10, "area-table": 3,
           "explore-space": 5,
           **{name: weight for name, (_, weight) in ROBUST_TARGETS.items()}}
