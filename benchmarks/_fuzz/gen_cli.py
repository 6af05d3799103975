"""CLI argument vectors for every qsim command, from its real option list, with hostile values.

A case folder holds the tiny float models (tiny/ SkriptND, tn/ NNEF 1.0), the tiny quantized
models (q/ TOSA, qc/ CVM), calibration and input arrays, and hostile data files (empty, text,
NaN, object arrays, a header declaring 10^12 items, ...), an empty folder, a regular file used
as a folder, a symlink loop, and mine/, which looks like an earlier output but holds a user's file. Every file the case starts with is protected (must be
byte-identical afterwards), except a file the argv names as an output file (`--output`,
`--vcd`), and an earlier `qsim quantize` output that `quantize -o` names (q/, qc/), which qsim
replaces by design: the user asked for them to be written. Output folders that are input folders
(`-o tiny`) stay protected: a writer must refuse them or leave the inputs intact.
"""
from __future__ import annotations

import os
import random

from .corpus import Corpus
from .runner import Case

MODELS_FLOAT = ("tiny", "tiny/main.sknd", "tn", "tn/graph.nnef")
MODELS_Q = ("q", "qc", "q/main.sknd")
HOSTILE_PATHS = ("", ".", "..", "nosuch", "dir", "file.txt", "loop", "empty.npy", "x.npy", "/proc/self/status",
                 "-", "--", "tiny/../tiny", "a" * 5000, "caf\udce9", "/dev/null", "tiny/f.dat")
INTS = ("0", "-1", "1", "2", "3", "8", "9", "NaN", "1e3", "99999999999999999999", "", "0x10", " 5", "-9209",
        "2147483648", "inf")
DATA = ("calib.npy", "calib.npz", "x.npy", "batch.npy", "empty.npy", "text.npy", "nan.npy", "inf.npy", "big.npy",
        "negshape.npy", "obj.npy", "obj.npz", "int8.npy", "int64.npy", "uint8.npy", "wrong.npy", "scalar.npy",
        "zero.npy", "f16.npy", "f64.npy", "complex.npy", "bool.npy", "str.npy", "struct.npy", "fortran.npy",
        "flat.npy", "nhwc.npy", "truncated.npy", "badlabels.npz", "shortlabels.npz", "neglabels.npz",
        "twoarrays.npz", "emptyz.npz", "imgs", "dir", "nosuch.npy", "file.txt", "tiny")
OUT_DIRS = ("out", "out", "out", "tiny", "q", ".", "dir", "file.txt", "file.txt/sub", "/proc/self/nope/out",
            "", "out/../tiny", "x.npy", "out/deep/er", "tn", "mine", "mine", "tiny/qsim-out")
OUT_FILES = ("y.npy", "y.npy", "y.npz", "x.npy", "dir", "file.txt/y.npy", "/proc/self/nope.npy", "", "tiny/f.dat",
             "y.txt", "tiny")
CONFIGS = ("8x8", "16x16", "32x32", "16x16:os", "8x8:ws", "8x8:xx", "", "cfg.toml", "bin.toml", "nosuch.toml",
           "dir", "x.npy", "4x4", "16X16", "8x8:", ":os")
SWEEPS = ("size=8,16", "dataflow=ws,os", "rows=4", "size=0", "size=-1", "bogus=1", "size=", "=", "size",
          "size=8,8,8", "clock_mhz=nan", "dram_bytes_per_cycle=1e400", "cols=1,2", "input_buffer_bytes=1")
# export-rtl runs Yosys compiled to WebAssembly, whose runtime reserves (not uses) 4 GiB of address
# space up front; under the usual cap that reservation fails, which says nothing about qsim.
RTL_ADDRESS_SPACE = 16 << 30
MAX_BYTES = ("1", "1K", "100", "64M", "0", "-1", "x", "4G", "1e9", "99999999999999999T", "")


def _pick(rng: random.Random, ordinary, hostile, p_hostile: float = 0.3):
    return rng.choice(hostile) if rng.random() < p_hostile else rng.choice(ordinary)


def _opt_int(rng, ordinary=("1", "2", "4")):
    return _pick(rng, ordinary, INTS)


def _argv(rng: random.Random) -> tuple[list[str], float | None, set[str]]:
    """(argv, timeout override, output files the user named)."""
    command = rng.choices(("check", "run", "quantize", "simulate", "export-vectors", "export-rtl",
                           "selftest", "none"), weights=(18, 25, 20, 12, 14, 2, 4, 5))[0]
    out_files: set[str] = set()
    timeout = None
    argv: list[str]
    if command == "none":
        argv = rng.choice(([], ["--version"], ["-h"], ["bogus"], ["--max-tensor-bytes"], ["--bogus", "check"],
                           ["check", "-h"], ["quantize", "--help"], ["\udcff"]))
    elif command == "check":
        argv = ["check", _pick(rng, MODELS_FLOAT + MODELS_Q, HOSTILE_PATHS)]
        if rng.random() < 0.3:
            argv.append("--all")
        if rng.random() < 0.3:
            argv += ["--graph", rng.choice(("tiny", "g", "nosuch", "", "main", "\udcff"))]
        if rng.random() < 0.3:
            argv += ["--keep", rng.choice(("nn.conv", "", ",,,", "nosuch", "nn.softmax,nn.conv", "conv", "math.add"))]
    elif command == "run":
        argv = ["run", _pick(rng, MODELS_FLOAT + MODELS_Q, HOSTILE_PATHS)]
        for _ in range(rng.choice((0, 1, 1, 1, 2))):
            value = _pick(rng, ("x.npy", "input=x.npy", "int8.npy"), DATA + ("nosuch=x.npy", "=x.npy", "input=", "x.npy=x.npy"))
            argv += ["--input", value]
        if rng.random() < 0.4:
            value = rng.choice(OUT_FILES)
            argv += ["--output", value]
            out_files.add(value)
        if rng.random() < 0.2:
            argv += ["--dump", rng.choice(OUT_DIRS)]
        if rng.random() < 0.3:
            argv += ["--backend", _pick(rng, ("kernels", "reference"), ("numpy", "", "KERNELS"))]
    elif command == "quantize":
        timeout = 60
        model = _pick(rng, MODELS_FLOAT, HOSTILE_PATHS + MODELS_Q + (None,), 0.25)
        argv = ["quantize"] + ([model] if model is not None else [])
        if model is None:
            argv += ["--subset", "--eval-limit", "20", "--calib-limit", "20"]
        if rng.random() < 0.9:
            argv += ["--calib", _pick(rng, ("calib.npy", "calib.npz"), DATA)]
        if rng.random() < 0.3:
            argv += ["--eval", _pick(rng, ("calib.npz", "calib.npy"), DATA)]
        if rng.random() < 0.8:
            argv += [rng.choice(("-o", "--out")), rng.choice(OUT_DIRS)]
        argv.append("-q")
        for opt, ok, bad in (("--target", ("tosa", "cvm"), ("TOSA", "", "x")),
                             ("--observer", ("minmax", "percentile", "mse"), ("max", "")),
                             ("--precision", ("int8", "16x8"), ("int4", "")),
                             ("--weights", ("per-channel", "per-tensor"), ("channel",)),
                             ("--rounding", ("single", "double"), ("triple",)),
                             ("--weight-rounding", ("nearest", "adaptive"), ("up",)),
                             ("--backend", ("kernels", "reference"), ("gpu",))):
            if rng.random() < 0.25:
                argv += [opt, _pick(rng, ok, bad, 0.15)]
        for opt in ("--calib-limit", "--eval-limit", "--cvm-precision"):
            if rng.random() < 0.2:
                argv += [opt, _opt_int(rng, ("1", "2", "4", "8") if opt != "--cvm-precision" else ("2", "4", "8"))]
        for flag in ("--no-bias-correction", "--subset"):
            if rng.random() < 0.15:
                argv.append(flag)
    elif command == "simulate":
        timeout = 60
        model = _pick(rng, MODELS_Q, HOSTILE_PATHS + MODELS_FLOAT, 0.25)
        argv = ["simulate", model, "--engine", _pick(rng, ("model",), ("bogus", "", "MODEL"), 0.05), "-q"]
        if rng.random() < 0.4:
            argv += ["--config", _pick(rng, ("8x8", "16x16", "cfg.toml", "16x16:os"), CONFIGS)]
        if rng.random() < 0.7:
            argv += ["--input", _pick(rng, ("x.npy", "int8.npy"), DATA)]
        if rng.random() < 0.7:
            argv += ["-o", rng.choice(OUT_DIRS)]
        if rng.random() < 0.1:
            argv += ["--sweep"] + rng.sample(SWEEPS, rng.randint(1, 2))
        if rng.random() < 0.1:
            value = rng.choice(OUT_FILES)
            argv += ["--vcd", value]
            out_files.add(value)
    elif command == "export-vectors":
        timeout = 60
        argv = ["export-vectors"]
        if rng.random() < 0.3:
            argv += ["--corner-cases", _opt_int(rng, ("1", "3", "10")), "--seed", _opt_int(rng, ("0", "1", "7"))]
            if rng.random() < 0.1:
                argv.append("q")
        else:
            argv.append(_pick(rng, MODELS_Q, HOSTILE_PATHS + MODELS_FLOAT, 0.25))
            for _ in range(rng.choice((0, 1, 1, 2))):
                argv += ["--input", _pick(rng, ("x.npy", "input=x.npy", "int8.npy"), DATA)]
        if rng.random() < 0.95:
            argv += ["--out", rng.choice(OUT_DIRS)]
        if rng.random() < 0.4:
            argv += ["--config", _pick(rng, ("8x8", "16x16", "cfg.toml"), CONFIGS)]
    elif command == "export-rtl":
        timeout = 120
        argv = ["export-rtl", "--config", _pick(rng, ("8x8", "cfg.toml"), CONFIGS, 0.6)]
        if rng.random() < 0.95:
            argv += ["--out", rng.choice(OUT_DIRS)]
    else:
        argv = ["selftest"]
        if rng.random() < 0.7:
            argv += ["--seed", _opt_int(rng, ("0", "1", "42"))]
    if rng.random() < 0.04:
        argv = ["--max-tensor-bytes", rng.choice(MAX_BYTES)] + argv
    if rng.random() < 0.03 and argv:
        # a stray or repeated option
        argv.insert(rng.randrange(len(argv) + 1), rng.choice(("--bogus", "-o", "--input", "--config", "-q")))
    return argv, timeout, out_files


def cli_files(corpus: Corpus) -> tuple[dict[str, bytes], tuple[str, ...], dict[str, str]]:
    files = {}
    files.update({f"tiny/{k}": v for k, v in corpus.tiny.items()})
    files.update({f"tn/{k}": v for k, v in corpus.tiny_nnef1.items()})
    files.update({f"q/{k}": v for k, v in corpus.quantized["q"].items()})
    files.update({f"qc/{k}": v for k, v in corpus.quantized["qc"].items()})
    files["calib.npy"] = corpus.calib
    files["x.npy"] = corpus.x
    files.update(corpus.data_files)
    files.update(corpus.images)
    files["file.txt"] = b"a regular file\n"
    # a folder that looks like an earlier output (quantization.json, report.json, arrays) but
    # holds the user's own notes: never replaced, whichever command names it
    files.update({"mine/quantization.json": b"{}\n", "mine/report.json": b"{}\n",
                  "mine/a.npy": corpus.x, "mine/notes.txt": b"the user's own\n"})
    return files, ("dir",), {"loop": "loop"}


def _replaced_earlier_output(argv: list[str]) -> str | None:
    """The folder `qsim quantize -o` may replace by design: an earlier quantize output (q/, qc/
    hold quantization.json) that is not also an input of the command. qsim swaps such a folder
    for the new result (README, "Outputs"), so its files are outputs, not protected inputs."""
    if not argv or argv[0] != "quantize":
        return None
    outs = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--out")]
    if not outs:
        return None
    folder = os.path.normpath(outs[-1])
    others = [os.path.normpath(a) for i, a in enumerate(argv[1:], 1)
              if a not in ("-o", "--out") and argv[i - 1] not in ("-o", "--out")]
    if folder in ("q", "qc") and not any(o == folder or o.startswith(folder + "/") for o in others):
        return folder
    return None


def gen_cli(rng: random.Random, corpus: Corpus) -> Case:
    argv, timeout, out_files = _argv(rng)
    files, dirs, links = corpus.cli_layout
    replaced = _replaced_earlier_output(argv)
    if replaced is not None:
        out_files = set(out_files) | {f for f in files if f.startswith(replaced + "/")}
    protected = tuple(sorted(set(files) - out_files))
    return Case("cli", argv[0] if argv and not argv[0].startswith("-") else "global", dict(files),
                argv=argv, dirs=dirs, symlinks=links, protected=protected, timeout_s=timeout,
                address_space_bytes=RTL_ADDRESS_SPACE if "export-rtl" in argv else None)
