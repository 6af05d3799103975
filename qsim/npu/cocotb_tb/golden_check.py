"""The testbench's data: golden vectors per layer, the qsim NPU programs that compute them,
and the check of a DUT's output against the golden tensor (numpy only, no cocotb).

Folder layout (written by `qsim export-vectors --cocotb`):
  vectors/manifest.json, vectors/NNN_layer/<role>.npy|.hex   the golden vectors (docs/vectors.md)
  programs/manifest.json                                     per layer: the tensor the DUT
                                                             writes and the programs writing it
  programs/NNN_layer/pK.instr, pK.dram                       program K: instruction words
                                                             (little-endian) and its initial DRAM image
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VECTORS = "vectors"
PROGRAMS = "programs"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Program:
    """One program of the qsim NPU: run `instrs` on a DRAM holding `dram`; the program's result
    is then the `out_shape` array of `out_dtype` at byte `out_addr`. An array program's result
    is an [M, N] matrix landing in the checked tensor at columns `cols` (`batch` None: rows =
    the tensor's leading axes flattened; `phase` set: rows = the pixels of one output phase of a
    transposed convolution, row-major); a vector program's (`cols` None) is the whole tensor."""
    instrs: bytes
    dram: np.ndarray                 # uint8
    out_addr: int
    out_shape: tuple
    out_dtype: np.dtype
    cycles: int                      # cycles the qsim NPU takes (qsim's cycle model)
    batch: int | None
    cols: tuple[int, int] | None     # [first, last) column of the checked tensor's last axis
    phase: tuple | None = None       # (py, px, sy, sx): rows are output[:, py::sy, px::sx] (TRANSPOSE_CONV2D)

    def result(self, dram: bytes | bytearray | np.ndarray) -> np.ndarray:
        size = int(np.prod(self.out_shape)) * self.out_dtype.itemsize
        raw = np.frombuffer(bytes(dram[self.out_addr:self.out_addr + size]), np.uint8)
        if raw.size != size:
            raise ValueError(f"DRAM of {len(dram)} bytes ends before the result at byte "
                             f"{self.out_addr} + {size}")
        return raw.view(self.out_dtype).reshape(self.out_shape).copy()


@dataclass(frozen=True)
class Layer:
    index: int
    name: str
    folder: str                      # NNN_layer, in vectors/ and programs/
    op: str                          # e.g. CONV2D+RESCALE+CLAMP
    kind: str                        # "npu" or "host" (docs/vectors.md)
    scalars: dict
    tensors: dict                    # role -> manifest entry (npy, hex, shape, dtype, ...)
    check: str | None                # the role the qsim NPU writes (None: not run on the NPU)
    programs: tuple[Program, ...]
    why_not: str                     # why the qsim NPU does not run it (when check is None)
    unit: str = ""                   # "array" or "vector": the NPU unit the programs use
    part: int = 0                    # a layer on both units (int32 sums, then a vector RESCALE)
                                     # is two testbench layers: part 0 array, part 1 vector

    @property
    def test_name(self) -> str:
        return self.folder if not self.part else f"{self.folder}.{self.part}"

    def path(self, tb_dir: Path, role: str) -> Path:
        return Path(tb_dir) / VECTORS / self.tensors[role]["npy"]

    def golden(self, tb_dir: Path, role: str | None = None) -> np.ndarray:
        """The golden tensor of `role` (default: the checked one), read from its .npy file."""
        return np.load(self.path(tb_dir, role or self.check), allow_pickle=False)


def load_layers(tb_dir: str | Path) -> list[Layer]:
    tb = Path(tb_dir)
    vectors = json.loads((tb / VECTORS / MANIFEST).read_text())
    programs = json.loads((tb / PROGRAMS / MANIFEST).read_text())
    layers = []
    for index, entry in enumerate(vectors["layers"]):
        runs = programs["layers"].get(entry["dir"], {}).get("runs") or [{}]
        for part, run in enumerate(runs):
            progs = tuple(_program(tb, p) for p in run.get("programs", ()))
            layers.append(Layer(index=index, name=entry["name"], folder=entry["dir"], op=entry["op"],
                                kind=entry["kind"], scalars=entry.get("scalars", {}),
                                tensors=entry["tensors"], check=run.get("check"), programs=progs,
                                why_not=run.get("why_not", ""), unit=run.get("unit", ""), part=part))
    return layers


def _program(tb: Path, entry: dict) -> Program:
    return Program(instrs=(tb / PROGRAMS / entry["instrs"]).read_bytes(),
                   dram=np.fromfile(tb / PROGRAMS / entry["dram"], np.uint8),
                   out_addr=entry["out_addr"], out_shape=tuple(entry["out_shape"]),
                   out_dtype=np.dtype(entry["out_dtype"]), cycles=entry["cycles"],
                   batch=entry["batch"], cols=None if entry["cols"] is None else tuple(entry["cols"]),
                   phase=None if entry.get("phase") is None else tuple(entry["phase"]))


def assemble(layer: Layer, shape, dtype, results: list[np.ndarray]) -> np.ndarray:
    """The checked tensor from its programs' results, in program order."""
    if len(layer.programs) == 1 and layer.programs[0].cols is None:      # a vector program
        return results[0].reshape(shape)
    out = np.zeros(shape, dtype)
    rows = out.reshape(-1, out.shape[-1]) if out.ndim > 1 else out.reshape(1, -1)
    for program, result in zip(layer.programs, results):
        first, last = program.cols
        if program.phase is not None:
            py, px, sy, sx = program.phase
            part = out[:, py::sy, px::sx, first:last]
            out[:, py::sy, px::sx, first:last] = result.reshape(part.shape)
        elif program.batch is None:
            rows[:, first:last] = result
        else:
            out[program.batch, :, first:last] = result
    return out


def mismatch(layer: Layer, role: str, expected: np.ndarray, actual: np.ndarray) -> str | None:
    """None when equal; else a message naming the layer, the tensor file and the first
    differing element (index, expected and DUT values, in decimal and hex)."""
    file = f"{VECTORS}/{layer.tensors[role]['npy']}"
    if actual.shape != expected.shape:
        return (f"layer {layer.name!r} ({layer.op}): DUT output shape {list(actual.shape)}, "
                f"golden {file} {list(expected.shape)}")
    differ = np.argwhere(actual.astype(np.int64) != expected.astype(np.int64))
    if not len(differ):
        return None
    index = tuple(int(i) for i in differ[0])
    bits = expected.dtype.itemsize * 8
    hexed = lambda v: f"0x{int(v) & ((1 << bits) - 1):0{bits // 4}x}"   # noqa: E731
    want, got = expected[index], actual[index]
    return (f"layer {layer.name!r} ({layer.op}): element {list(index)} of {file}: golden "
            f"{int(want)} ({hexed(want)}), DUT {int(got)} ({hexed(got)}); "
            f"{len(differ)} of {expected.size} elements differ")
