"""Seed material, built once per campaign in the parent: repo texts, tiny models, data files.

Everything is held as bytes (relative path -> content) so a case copies what it needs into its
own folder; nothing a case does can change the seeds. The tiny models keep quantize, simulate
and export-vectors to about a second per run.
"""
from __future__ import annotations

import functools
import glob
import io
import os
import subprocess
import sys
import zlib

import numpy as np

from qsim.tensorfile import ItemCode, StoredQuantization, Quantizer, write_tensor

from .gen_graphs import dat_bytes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TINY_SKND = """import nn;
import math;

graph tiny {
    @input {
        input: real[1, 1, 4, 4];
    }
    @output {
        output: real[1, 3];
    }
    @variable {
        f: real[2, 1, 3, 3];
        w: real[3, 2];
        b: real[3];
    }
    @compose {
        c = nn.conv{stride=[1, 1], padding=[1, 1, 1, 1]}(input, f);
        r = nn.relu(c);
        p = math.mean_reduce{axes=[2, 3], squeeze=true}(r);
        output = nn.linear(p, w, b);
    }
}
"""

TINY_NNEF1 = """version 1.0;

graph tiny( input ) -> ( output )
{
    input = external<scalar>(shape = [1, 1, 4, 4]);
    f = variable<scalar>(shape = [2, 1, 3, 3], label = 'f');
    w = variable<scalar>(shape = [3, 2], label = 'w');
    b = variable<scalar>(shape = [1, 3], label = 'b');
    c = conv(input, f, 0.0, padding = [(1, 1), (1, 1)]);
    r = relu(c);
    p = mean_reduce(r, axes = [2, 3]);
    q = reshape(p, shape = [1, 2]);
    output = linear(q, w, b);
}
"""

TINY_QUANT = """"input": linear_quantize(min = 0.0, max = 1.0, bits = 8);
"c": linear_quantize(min = -4.0, max = 4.0, bits = 8);
"output": linear_quantize(min = -2.0, max = 2.0, bits = 8);
"""

TINY_TOML = """[npu]
name = "tiny"
rows = 4
cols = 4
dataflow = "ws"
input_buffer_bytes = 4096
weight_buffer_bytes = 4096
accumulator_buffer_bytes = 8192
dram_bytes_per_cycle = 16
clock_mhz = 500.0
"""


def _read_tree(root: str) -> dict[str, bytes]:
    out = {}
    for base, _, files in os.walk(root):
        for name in files:
            full = os.path.join(base, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = f.read()
    return out


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=True)
    return buf.getvalue()


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _zeros_gzip(n_bytes: int) -> bytes:
    """A gzip stream of n_bytes zeros, written in chunks (a decompression bomb, ~1000:1)."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [comp.compress(chunk) for _ in range(n_bytes >> 20)]
    parts.append(comp.flush())
    return b"".join(parts)


class Corpus:
    def __init__(self, workdir: str):
        rng = np.random.default_rng(0)
        self.sknd_texts: list[tuple[str, bytes]] = []
        for pattern in ("qsim/stdlib/*.sknd", "tests/fixtures/skriptnd/*.sknd", "qsim/zoo/fashion_cnn/main.sknd"):
            for path in sorted(glob.glob(os.path.join(REPO, pattern))):
                with open(path, "rb") as f:
                    self.sknd_texts.append((os.path.relpath(path, REPO), f.read()))
        self.nnef1_texts: list[tuple[str, bytes]] = []
        self.quant_texts: list[tuple[str, bytes]] = []
        for pattern in ("tests/fixtures/nnef1/spec/*", "tests/nnef1/*.nnef"):
            for path in sorted(glob.glob(os.path.join(REPO, pattern))):
                with open(path, "rb") as f:
                    blob = f.read()
                if path.endswith(".nnef"):
                    self.nnef1_texts.append((os.path.relpath(path, REPO), blob))
                elif path.endswith(".quant"):
                    self.quant_texts.append((os.path.relpath(path, REPO), blob))
        self.fashion = _read_tree(os.path.join(REPO, "qsim/zoo/fashion_cnn"))
        f = rng.normal(size=(2, 1, 3, 3)).astype(np.float32)
        w = rng.normal(size=(3, 2)).astype(np.float32)
        b = rng.normal(size=(3,)).astype(np.float32)
        self.tiny = {"main.sknd": TINY_SKND.encode(), "f.dat": dat_bytes(f), "w.dat": dat_bytes(w),
                     "b.dat": dat_bytes(b)}
        self.tiny_nnef1 = {"graph.nnef": TINY_NNEF1.encode(), "graph.quant": TINY_QUANT.encode(),
                           "f.dat": dat_bytes(f), "w.dat": dat_bytes(w),
                           "b.dat": dat_bytes(b.reshape(1, 3))}
        self.quant_texts.append(("tiny/graph.quant", TINY_QUANT.encode()))
        self.toml = TINY_TOML.encode()
        self.calib = _npy(rng.random((4, 1, 4, 4)).astype(np.float32))
        self.x = _npy(rng.random((1, 1, 4, 4)).astype(np.float32))
        self.data_files = self._hostile_data(rng)
        self.dat_samples = self._dat_samples(rng)
        self.images = self._images(rng)
        self.workdir = workdir

    # built on first use: a campaign without the targets that need them skips their cost

    @functools.cached_property
    def quantized(self) -> dict[str, dict[str, bytes]]:
        return self._quantize(self.workdir)

    @functools.cached_property
    def bomb_gz(self) -> bytes:
        return _zeros_gzip(1100 << 20)

    @functools.cached_property
    def cli_layout(self):
        from .gen_cli import cli_files
        return cli_files(self)

    def _quantize(self, workdir: str) -> dict[str, dict[str, bytes]]:
        """The tiny model quantized by the CLI (TOSA and CVM), in a fresh process, once."""
        base = os.path.join(workdir, "seed")
        os.makedirs(os.path.join(base, "tiny"), exist_ok=True)
        for rel, blob in self.tiny.items():
            with open(os.path.join(base, "tiny", rel), "wb") as f:
                f.write(blob)
        with open(os.path.join(base, "calib.npy"), "wb") as f:
            f.write(self.calib)
        out = {}
        for name, extra in (("q", []), ("qc", ["--target", "cvm"])):
            subprocess.run([sys.executable, "-m", "qsim", "quantize", "tiny", "--calib", "calib.npy",
                            "-o", name, "-q"] + extra, cwd=base, check=True,
                           stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": REPO})
            tree = _read_tree(os.path.join(base, name))
            # the model proper; reports and plots are outputs nobody reads back
            out[name] = {k: v for k, v in tree.items() if k.endswith((".sknd", ".dat", ".json"))}
        return out

    @staticmethod
    def _hostile_data(rng) -> dict[str, bytes]:
        shape = (1, 1, 4, 4)
        good = rng.random(shape).astype(np.float32)
        huge_header = _npy(np.zeros(3, np.float32)).replace(b"(3,)", b"(1000000000000,)")
        return {
            "empty.npy": b"",
            "text.npy": b"hello, not an array\n",
            "nan.npy": _npy(np.full(shape, np.nan, np.float32)),
            "inf.npy": _npy(np.full(shape, np.inf, np.float32)),
            "big.npy": huge_header,
            "negshape.npy": _npy(np.zeros(3, np.float32)).replace(b"(3,)", b"(-3,)"),
            "obj.npy": _npy(np.array([{"a": 1}, None], dtype=object)),
            "obj.npz": _npz(x=np.array([1, "a", None], dtype=object)),
            "int8.npy": _npy(rng.integers(-128, 128, shape).astype(np.int8)),
            "int64.npy": _npy(np.full(shape, 2 ** 62, np.int64)),
            "uint8.npy": _npy(rng.integers(0, 256, shape).astype(np.uint8)),
            "wrong.npy": _npy(rng.random((2, 3)).astype(np.float32)),
            "scalar.npy": _npy(np.float32(1.5)),
            "zero.npy": _npy(np.zeros((0, 1, 4, 4), np.float32)),
            "f16.npy": _npy(good.astype(np.float16)),
            "f64.npy": _npy(good.astype(np.float64)),
            "complex.npy": _npy(good.astype(np.complex64)),
            "bool.npy": _npy(good > 0.5),
            "str.npy": _npy(np.array(["abc", "de"])),
            "struct.npy": _npy(np.zeros(3, dtype=[("a", "i4"), ("b", "f4")])),
            "fortran.npy": _npy(np.asfortranarray(rng.random((1, 1, 4, 4)).astype(np.float32))),
            "flat.npy": _npy(rng.random((16,)).astype(np.float32)),
            "batch.npy": _npy(rng.random((3, 1, 4, 4)).astype(np.float32)),
            "nhwc.npy": _npy(rng.random((1, 4, 4, 1)).astype(np.float32)),
            "truncated.npy": _npy(good)[:-7],
            "calib.npz": _npz(x=rng.random((4, 1, 4, 4)).astype(np.float32), y=np.arange(4)),
            "badlabels.npz": _npz(x=rng.random((4, 1, 4, 4)).astype(np.float32), y=np.array([0.5, 1, 2, 3])),
            "shortlabels.npz": _npz(x=rng.random((4, 1, 4, 4)).astype(np.float32), y=np.arange(9)),
            "neglabels.npz": _npz(images=rng.random((4, 1, 4, 4)).astype(np.float32), labels=np.array([-1, -9209, 2 ** 40, 3])),
            "twoarrays.npz": _npz(a=np.zeros((2, 1, 4, 4), np.float32), b=np.zeros((2, 1, 4, 4), np.float32)),
            "emptyz.npz": _npz(),
            "cfg.toml": TINY_TOML.encode(),
            "bin.toml": b"\xff\xfe\x00[npu]\n",
        }

    @staticmethod
    def _images(rng) -> dict[str, bytes]:
        """imgs/: a few small images (png, bmp, a broken jpg) and a labels.txt with odd lines."""
        from PIL import Image
        out = {}
        for i, (mode, size, fmt) in enumerate((("L", (4, 4), "PNG"), ("RGB", (9, 7), "PNG"),
                                              ("RGBA", (1, 1), "PNG"), ("L", (28, 28), "BMP"))):
            buf = io.BytesIO()
            channels = len(mode)
            Image.fromarray(rng.integers(0, 256, size[::-1] + ((channels,) if channels > 1 else ()))
                            .astype(np.uint8), mode).save(buf, fmt)
            out[f"imgs/im{i}.{fmt.lower()}"] = buf.getvalue()
        out["imgs/broken.jpg"] = b"\xff\xd8\xff\xe0 not really a jpeg"
        out["imgs/labels.txt"] = b"im0.png 1\nim1.png -3\nim2.png x\nnosuch.png 2\n\nim3.bmp 99999999999999999999\n"
        return out

    @staticmethod
    def _dat_samples(rng) -> list[bytes]:
        out = []
        for dtype in (np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.int32,
                      np.int64, np.uint16, np.bool_):
            out.append(dat_bytes((rng.random((2, 3)) * 10).astype(dtype)))
        for bits in (1, 3, 4, 12):
            buf = io.BytesIO()
            write_tensor(buf, rng.integers(0, 2, (5,)).astype(np.uint8), code=ItemCode.INTEGER, bits=bits)
            out.append(buf.getvalue())
        buf = io.BytesIO()
        write_tensor(buf, rng.random((4,)).astype(np.float32),
                     quantization=StoredQuantization(Quantizer.LINEAR, -1.0, 1.0, 8))
        out.append(buf.getvalue())
        buf = io.BytesIO()
        write_tensor(buf, rng.random((4,)).astype(np.float32) + 0.1,
                     quantization=StoredQuantization(Quantizer.LOGARITHMIC, -2.0, 2.0, 8))
        out.append(buf.getvalue())
        return out
