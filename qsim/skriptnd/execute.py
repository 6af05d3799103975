"""`qsim run` on a float model (TEMPORARY: moves to qsim/commands/run.py once that exists; the
execution itself is qsim.runtime's)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .. import ir
from ..atomic import atomic_directory, atomic_file
from ..errors import UnsupportedError
from ..runtime import execute
from ..userdata import read_inputs as read_input_arrays


def load_model(path: str) -> ir.Graph:
    import qsim
    load = getattr(qsim, "load", None)
    if load is None:
        raise UnsupportedError("this qsim build cannot load models yet (qsim.load is missing)")
    return load(path)


def read_inputs(graph: ir.Graph, specs: list[str]) -> dict[str, np.ndarray]:
    return read_input_arrays(graph.inputs, specs)


def _file_name(tensor_name: str) -> str:
    return tensor_name.replace("/", "_") + ".npy"


def write_outputs(graph: ir.Graph, values: Mapping[str, np.ndarray], output: str | None,
                  dump: str | None) -> None:
    if output:
        outs = {n: values[n] for n in graph.outputs}
        with atomic_file(output) as tmp, open(tmp, "wb") as f:
            if len(outs) == 1:
                np.save(f, next(iter(outs.values())))
            else:
                np.savez(f, **outs)
    if dump:
        with atomic_directory(dump) as tmpdir:
            for name, value in values.items():
                np.save(tmpdir / _file_name(name), value)


def summarize(graph: ir.Graph, values: Mapping[str, np.ndarray]) -> str:
    lines = []
    for name in graph.outputs:
        v = values[name]
        stats = (f" min {v.min():.6g} max {v.max():.6g} mean {v.mean():.6g}"
                 if v.size and v.dtype.kind in "iuf" else "")
        lines.append(f"{name}: {v.dtype}{list(v.shape)}{stats}")
    return "\n".join(lines)


def run_float_model(path: str, input_specs: list[str], output: str | None = None,
                    dump: str | None = None) -> str:
    graph = load_model(path)
    values = execute(graph, read_inputs(graph, input_specs))
    write_outputs(graph, values, output, dump)
    return summarize(graph, values)
