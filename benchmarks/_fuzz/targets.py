"""Case generators of the first fuzz targets (registry.py names every target: `TARGETS[name](rng, corpus) -> Case`).

Targets and what they feed:
  sknd        SkriptND texts (repo seeds mutated, generated graphs, generated + mutated) as a
              model folder with .dat files or a lone .sknd; `qsim check` or `qsim run`, and
              now and then `qsim quantize` of a generated graph (lowering random graphs).
  nnef1       NNEF 1.0 graph.nnef (flat and compositional, spec fixtures and generated), with
              .dat files and sometimes graph.quant; `qsim check` or `qsim run`.
  dat         .dat tensor files: headers with every field at ordinary and extreme values, and
              byte-mutated valid files; read by qsim.tensorfile or inside a model via the CLI.
  quant       graph.quant texts (generated with extreme numbers, and mutated) next to a tiny
              NNEF 1.0 model; `qsim check`, sometimes `qsim quantize`.
  container   .tgz/.tar containers: valid, mutated, hostile members (huge declared sizes,
              links, `..` and absolute names, duplicates, a 1.1 GiB gzip bomb).
  cli         argument vectors for every command from the real option lists, with hostile values.
  npu-config  npu.toml texts: generated (extreme values, wrong types) and mutated; read by
              qsim.npu.config.load_config, or used by simulate/export-vectors/export-rtl.
  onnx        ONNX models (small CNN, shape chain, attention core) mutated as bytes and as
              structure (gen_onnx.py); `qsim check` or `qsim run`.
  qdq         ONNX QDQ models (QuantizeLinear/DequantizeLinear pairs) with their parameters,
              types and pairing mutated (gen_qdq.py); `qsim check`, `run` or `quantize` (no --calib).
  scheduler   Dask scheduler addresses and the greetings of the peers behind them (gen_scheduler.py).
"""
from __future__ import annotations

import io
import random
import struct
import tarfile

import numpy as np

from . import mutate
from .gen_cli import RTL_ADDRESS_SPACE
from .corpus import Corpus, TINY_TOML
from .gen_graphs import graph_quant, nnef1_graph, skriptnd_graph
from .runner import Case

# ------------------------------------------------------------------------- helpers


def _under(prefix: str, files: dict[str, bytes]) -> dict[str, bytes]:
    return {f"{prefix}/{k}": v for k, v in files.items()}


def _input_npy(shape, rng: random.Random) -> bytes:
    buf = io.BytesIO()
    if all(isinstance(e, int) and 0 <= e for e in shape) and int(np.prod(shape)) <= 1 << 16:
        arr = np.random.default_rng(rng.randrange(2 ** 32)).random(shape).astype(np.float32)
        if rng.random() < 0.1:
            arr[...] = rng.choice((np.nan, np.inf, -np.inf, 3e38, 0.0))
    else:
        arr = np.zeros((1, 1, 4, 4), np.float32)
    np.save(buf, arr)
    return buf.getvalue()


def _model_argv(rng: random.Random, model: str, shape, files: dict[str, bytes]) -> list[str]:
    """check (most cases) or run with a matching input."""
    pick = rng.random()
    if pick < 0.75:
        argv = ["check", model]
        if rng.random() < 0.2:
            argv.append("--all")
        if rng.random() < 0.1:
            argv += ["--keep", rng.choice(("nn.conv", "nn.softmax,nn.conv", "nosuch", ",,", "linear"))]
        return argv
    files["x.npy"] = _input_npy(shape, rng)
    argv = ["run", model, "--input", "x.npy"]
    if rng.random() < 0.3:
        argv += ["--output", "y.npy"]
    if rng.random() < 0.1:
        argv += ["--dump", "dump"]
    return argv


def _calib_npy(shape, rng: random.Random) -> bytes | None:
    """Two calibration samples for a generated graph's input, or None when the shape is too big."""
    if not all(isinstance(e, int) and e > 0 for e in shape) or int(np.prod(shape)) > 1 << 14:
        return None
    buf = io.BytesIO()
    data = np.random.default_rng(rng.randrange(2 ** 32)).normal(size=(2,) + tuple(shape[1:]))
    np.save(buf, data.astype(np.float32))
    return buf.getvalue()


def _quantize_case(target: str, kind: str, rng: random.Random, files: dict[str, bytes], shape) -> Case | None:
    """`qsim quantize` of a generated model (lowering of random graphs to TOSA or CVM), or None."""
    calib = _calib_npy(shape, rng)
    if calib is None:
        return None
    files["calib.npy"] = calib
    argv = ["quantize", "m", "--calib", "calib.npy", "-o", "out", "-q",
            "--weight-rounding", "nearest" if rng.random() < 0.7 else "adaptive"]
    if rng.random() < 0.3:
        argv += ["--target", "cvm"]
    elif rng.random() < 0.2:
        argv += ["--precision", "16x8"]
    if rng.random() < 0.2:
        argv += ["--weights", "per-tensor"]
    if rng.random() < 0.3:
        argv += ["--observer", rng.choice(("minmax", "mse", "percentile"))]
    if rng.random() < 0.3:
        argv += ["--rounding", "double"]
    return Case(target, kind + ":quantize", files, argv=argv, timeout_s=60)


def _with_limit(rng: random.Random, argv: list[str]) -> list[str]:
    if rng.random() < 0.03:
        return ["--max-tensor-bytes", rng.choice(("1", "1K", "100", "64M", "0", "-1", "x"))] + argv
    return argv


# ------------------------------------------------------------------------- SkriptND


def gen_sknd(rng: random.Random, corpus: Corpus) -> Case:
    pick = rng.random()
    if pick < 0.35:
        name, text = rng.choice(corpus.sknd_texts)
        text, how = mutate.mutate_text(rng, text)
        kind = f"seed-mutated:{how}"
        if name.endswith("fashion_cnn/main.sknd"):
            files = dict(corpus.fashion)
            files["main.sknd"] = text
            files = _under("m", files)
            return Case("sknd", kind, files, argv=_with_limit(rng, _model_argv(rng, "m", [1, 1, 28, 28], files)))
        if rng.random() < 0.5:
            files = {"model.sknd": text}
            return Case("sknd", kind, files, argv=_with_limit(rng, ["check", "model.sknd"] + (["--all"] if rng.random() < 0.5 else [])))
        files = _under("m", {**corpus.tiny, "main.sknd": text})
        return Case("sknd", kind, files, argv=_with_limit(rng, _model_argv(rng, "m", [1, 1, 4, 4], files)))
    if pick < 0.45:
        text, how = mutate.mutate_text(rng, corpus.tiny["main.sknd"])
        files = _under("m", {**corpus.tiny, "main.sknd": text})
        return Case("sknd", f"tiny-mutated:{how}", files,
                    argv=_with_limit(rng, _model_argv(rng, "m", [1, 1, 4, 4], files)))
    text, dats, shape = skriptnd_graph(rng)
    blob = text.encode()
    kind = "generated"
    if pick >= 0.75 and rng.random() < 0.015:
        case = _quantize_case("sknd", kind, rng, _under("m", {"main.sknd": blob, **dats}), shape)
        if case is not None:
            return case
    if pick < 0.75:
        blob, how = mutate.mutate_text(rng, blob)
        kind = f"generated-mutated:{how}"
    files = _under("m", {"main.sknd": blob, **dats})
    return Case("sknd", kind, files, argv=_with_limit(rng, _model_argv(rng, "m", shape, files)))


# ------------------------------------------------------------------------- NNEF 1.0


def gen_nnef1(rng: random.Random, corpus: Corpus) -> Case:
    pick = rng.random()
    if pick < 0.3:
        name, text = rng.choice(corpus.nnef1_texts)
        if rng.random() < 0.8:
            text, how = mutate.mutate_text(rng, text)
        else:
            how = "as-is"
        files = {"m/graph.nnef": text}
        if rng.random() < 0.2:
            files["m/graph.quant"] = rng.choice(corpus.quant_texts)[1]
        argv = ["check", rng.choice(("m", "m/graph.nnef"))]
        return Case("nnef1", f"seed-mutated:{how}", files, argv=_with_limit(rng, argv))
    if pick < 0.4:
        text, how = mutate.mutate_text(rng, corpus.tiny_nnef1["graph.nnef"])
        files = _under("m", {**corpus.tiny_nnef1, "graph.nnef": text})
        return Case("nnef1", f"tiny-mutated:{how}", files,
                    argv=_with_limit(rng, _model_argv(rng, "m", [1, 1, 4, 4], files)))
    text, dats, shape, idents = nnef1_graph(rng)
    blob = text.encode()
    kind = "generated"
    if pick < 0.7:
        blob, how = mutate.mutate_text(rng, blob)
        kind = f"generated-mutated:{how}"
    files = _under("m", {"graph.nnef": blob, **dats})
    if rng.random() < 0.3:
        files["m/graph.quant"] = graph_quant(rng, idents).encode()
    if pick >= 0.7 and rng.random() < 0.015:
        case = _quantize_case("nnef1", kind, rng, files, shape)
        if case is not None:
            return case
    return Case("nnef1", kind, files, argv=_with_limit(rng, _model_argv(rng, "m", shape, files)))


# ------------------------------------------------------------------------- .dat files

U32_EXTREMES = (0, 1, 2, 3, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 128, 255, 256, 0x7FFF, 0xFFFF,
                0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


def random_dat(rng: random.Random) -> bytes:
    """A header with each field ordinary or extreme, and data of the declared, or wrong, length."""
    def field(ordinary):
        return ordinary if rng.random() < 0.7 else rng.choice(U32_EXTREMES)

    rank = field(rng.randint(0, 4))
    extents = [field(rng.choice((1, 2, 3, 5))) if i < min(rank, 8) else (0 if rng.random() < 0.95 else field(1))
               for i in range(8)]
    code = field(rng.choice((0, 0, 1, 2, 3, 4, 5, 0x10, 0x11)))
    if rng.random() < 0.05:
        code |= rng.choice((1, 0xFFFF)) << 16
    bits = field(rng.choice((1, 4, 8, 16, 32, 64)))
    count = 1
    for e in extents[:min(rank, 8)]:
        count *= e
    data_len = (count * bits + 7) // 8 if rng.random() < 0.8 else field(rng.randrange(64))
    params = bytearray(32)
    if rng.random() < 0.5:
        lo, hi = (rng.choice((-1.0, 0.0, 1.0, float("nan"), float("inf"), -float("inf"), 3.4e38, 1e-45, -2.0))
                  for _ in range(2))
        struct.pack_into("<ff", params, 0, lo, hi)
    elif rng.random() < 0.3:
        struct.pack_into("<I", params, 0, rng.choice((0, 1, 0xFFFFFFFF)))
    magic = b"N\xef" if rng.random() < 0.95 else rng.choice((b"NE", b"\x00\x00", b"\xef\x4e"))
    version = bytes((1 if rng.random() < 0.9 else rng.randrange(256), rng.randrange(3)))
    header = (magic + version + struct.pack("<II", data_len & 0xFFFFFFFF, rank & 0xFFFFFFFF)
              + struct.pack("<8I", *(e & 0xFFFFFFFF for e in extents))
              + struct.pack("<II", bits & 0xFFFFFFFF, code & 0xFFFFFFFF) + bytes(params) + bytes(44))
    have = data_len if data_len <= 1 << 16 else rng.randrange(1 << 12)
    if rng.random() < 0.1:
        have += rng.choice((-1, 1, 7))
    data = bytes(rng.randrange(256) for _ in range(min(max(have, 0), 4096))) + bytes(max(0, have - 4096))
    return header + data


def gen_dat(rng: random.Random, corpus: Corpus) -> Case:
    pick = rng.random()
    if pick < 0.5:
        blob, kind = random_dat(rng), "header-generated"
    elif pick < 0.8:
        blob = rng.choice(corpus.dat_samples)
        head, tail = mutate.byte_flip(rng, blob[:128]), blob[128:]
        blob, kind = head + tail, "header-flipped"
        if rng.random() < 0.3:
            blob, kind = mutate.byte_splice(rng, blob), "header-flipped+spliced"
    else:
        blob = rng.choice(corpus.dat_samples)
        blob, kind = rng.choice(mutate.BYTE_MUTATORS)(rng, blob), "data-mutated"
    where = rng.random()
    if where < 0.7:
        return Case("dat", kind, {"t.dat": blob}, call="read_tensor", call_arg="t.dat")
    if where < 0.85:
        files = _under("m", {**corpus.tiny, rng.choice(("f.dat", "w.dat", "b.dat")): blob})
        return Case("dat", kind + ":in-skriptnd", files, argv=_model_argv(rng, "m", [1, 1, 4, 4], files))
    files = _under("m", {**corpus.tiny_nnef1, rng.choice(("f.dat", "w.dat", "b.dat")): blob})
    return Case("dat", kind + ":in-nnef1", files, argv=_model_argv(rng, "m", [1, 1, 4, 4], files))


# ------------------------------------------------------------------------- graph.quant


def gen_quant(rng: random.Random, corpus: Corpus) -> Case:
    idents = ["input", "f", "w", "b", "c", "r", "p", "q", "output"]
    pick = rng.random()
    if pick < 0.5:
        text, kind = graph_quant(rng, idents).encode(), "generated"
    elif pick < 0.8:
        text, how = mutate.mutate_text(rng, rng.choice(corpus.quant_texts)[1])
        kind = f"seed-mutated:{how}"
    else:
        text, how = mutate.mutate_text(rng, graph_quant(rng, idents).encode())
        kind = f"generated-mutated:{how}"
    files = _under("m", {**corpus.tiny_nnef1, "graph.quant": text})
    if rng.random() < 0.03:
        files["calib.npy"] = corpus.calib
        return Case("quant", kind + ":quantize", files, timeout_s=60,
                    argv=["quantize", "m", "--calib", "calib.npy", "-o", "out", "-q",
                          "--weight-rounding", "nearest"])
    return Case("quant", kind, files, argv=_model_argv(rng, "m", [1, 1, 4, 4], files))


# ------------------------------------------------------------------------- containers


def _member(name: str, data: bytes, **kw) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    return info, data


def _tar_bytes(members, compress: bool, fmt=tarfile.GNU_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if compress else "w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def _raw_header(name: bytes, size: int, typeflag: bytes = b"0", linkname: bytes = b"") -> bytes:
    """A ustar header with any declared size (base-256 when it does not fit in octal)."""
    h = bytearray(512)
    h[0:len(name[:100])] = name[:100]
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    if size < 8 ** 11:
        h[124:136] = b"%011o\0" % size
    else:
        h[124:136] = b"\x80" + size.to_bytes(11, "big")
    h[136:148] = b"00000000000\0"
    h[156:157] = typeflag
    h[157:157 + len(linkname[:100])] = linkname[:100]
    h[257:265] = b"ustar\x0000"
    h[148:156] = b"        "
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def gen_container(rng: random.Random, corpus: Corpus) -> Case:
    model = corpus.tiny_nnef1
    members = [_member(k, v) for k, v in model.items()]
    pick = rng.random()
    compress = rng.random() < 0.6
    kind = "valid"
    if pick < 0.15:
        prefix = rng.choice(("tiny/", "./", "a/b/", ""))
        members = [_member(prefix + i.name, d) for i, d in members]
        kind = "valid-prefixed"
    elif pick < 0.55:
        hostile = rng.choice(("dotdot", "absolute", "symlink", "hardlink", "dir-named-graph",
                              "duplicate", "fifo", "device", "empty-name", "long-name", "sparse-big",
                              "symlink-loop", "dat-symlink", "many-members", "non-utf8-name"))
        kind = f"hostile:{hostile}"
        if hostile == "dotdot":
            members = [_member("../" + i.name if rng.random() < 0.5 else "x/../../" + i.name, d) for i, d in members]
        elif hostile == "absolute":
            members = [_member("/" + i.name, d) for i, d in members]
        elif hostile == "symlink":
            members = [m for m in members if m[0].name != "graph.nnef"]
            members.append(_member("graph.nnef", b"", type=tarfile.SYMTYPE,
                                   linkname=rng.choice(("/etc/passwd", "../graph.nnef", "/dev/zero", "f.dat"))))
        elif hostile == "hardlink":
            members.append(_member("f.dat", b"", type=tarfile.LNKTYPE, linkname=rng.choice(("graph.nnef", "/etc/passwd", "nosuch"))))
        elif hostile == "dir-named-graph":
            members = [m for m in members if m[0].name != "graph.nnef"]
            members.append(_member("graph.nnef", b"", type=tarfile.DIRTYPE))
        elif hostile == "duplicate":
            members.append(_member("graph.nnef", b"garbage (;"))
        elif hostile == "fifo":
            members.append(_member("graph.quant", b"", type=tarfile.FIFOTYPE))
        elif hostile == "device":
            members.append(_member("f.dat", b"", type=tarfile.CHRTYPE, devmajor=1, devminor=5))
        elif hostile == "empty-name":
            members.append(_member("", b"abc"))
        elif hostile == "long-name":
            members.append(_member("d" * 300 + "/graph.nnef", model["graph.nnef"]))
        elif hostile == "sparse-big":
            members.append(_member("big.dat", bytes(rng.choice((1, 1 << 20)))))
        elif hostile == "symlink-loop":
            members.append(_member("loop", b"", type=tarfile.SYMTYPE, linkname="loop"))
        elif hostile == "dat-symlink":
            members = [m for m in members if m[0].name != "f.dat"]
            members.append(_member("f.dat", b"", type=tarfile.SYMTYPE, linkname="/dev/urandom"))
        elif hostile == "many-members":
            members += [_member(f"junk{i}.dat", b"x") for i in range(rng.choice((100, 3000)))]
        elif hostile == "non-utf8-name":
            members.append(_member("caf\udce9.dat", b"x"))
    blob: bytes
    try:
        blob = _tar_bytes(members, compress, fmt=rng.choice((tarfile.GNU_FORMAT, tarfile.PAX_FORMAT)))
    except (ValueError, UnicodeError, tarfile.TarError):
        blob = _tar_bytes([_member(k, v) for k, v in model.items()], compress)
        kind += "(unencodable, fell back to valid)"
    if 0.55 <= pick < 0.7:
        # a member whose declared size is huge; the archive ends long before
        size = rng.choice((1 << 31, 1 << 33, 1 << 40, 8 ** 11 - 1, 1 << 62, 1 << 80))
        raw = b"".join(_raw_header(i.name.encode(), len(d)) + d + bytes(-len(d) % 512) for i, d in members)
        raw += _raw_header(rng.choice((b"graph.quant", b"huge.dat", b"graph.nnef", b"f.dat")), size) + bytes(1024)
        blob = _gzip(raw) if compress else raw
        kind = f"declared-size:{size}"
    elif 0.7 <= pick < 0.705:
        raw = _raw_header(b"graph.nnef", 1100 << 20)
        # the 1.1 GiB zeros member as a gzip bomb (the tar header is in its own gzip member)
        blob = _gzip(raw) + corpus.bomb_gz
        compress = True
        kind = "gzip-bomb"
    elif 0.705 <= pick < 0.95:
        blob = rng.choice(mutate.BYTE_MUTATORS)(rng, blob)
        kind = "mutated-bytes"
    elif pick >= 0.95:
        blob = rng.choice((b"", b"not a tar", bytes(512), bytes(10240), b"\x1f\x8b" + bytes(20)))
        kind = "not-a-container"
    name = "model.tgz" if compress else rng.choice(("model.tar", "model.tar.gz"))
    files = {name: blob}
    return Case("container", kind, files, argv=_with_limit(rng, _model_argv(rng, name, [1, 1, 4, 4], files)))


def _gzip(raw: bytes) -> bytes:
    import gzip
    return gzip.compress(raw, compresslevel=1)


# ------------------------------------------------------------------------- NPU config

TOML_VALUES = ("0", "1", "-1", "4", "16", "256", "4096", "65536", "1e400", "nan", "inf", "-inf",
               "9223372036854775807", "9223372036854775808", "1.5", "true", '"ws"', '"os"', '"OS"',
               '"x"', '""', "[]", "[1, 2]", "{}", "1979-05-27", "0x10", "0.0", "5e-324", '"\\u0000"',
               '"ddr4-3200"', '"LPDDR4-4266"', '"off"')
TOML_KEYS = ("name", "rows", "cols", "dataflow", "input_buffer_bytes", "weight_buffer_bytes",
             "accumulator_buffer_bytes", "dram_bytes_per_cycle", "clock_mhz", "bogus",
             "dram", "dram_trcd", "dram_trp", "dram_tcl", "dram_banks", "dram_row_bytes", "dram_burst_bytes",
             "cores")


def random_toml(rng: random.Random) -> bytes:
    lines = ["[npu]"] if rng.random() < 0.95 else [rng.choice(("[NPU]", "[npu.x]", "", "[[npu]]"))]
    base = dict(line.split(" = ", 1) for line in TINY_TOML.splitlines()[1:] if " = " in line)
    n = rng.choice((1, 4, 8, 16, 32, 64, 128, 1024, 4096))
    base["rows"] = base["cols"] = str(n)
    base["input_buffer_bytes"] = base["weight_buffer_bytes"] = str(n * 2 * n * rng.choice((1, 2)))
    base["accumulator_buffer_bytes"] = str(4 * n * 2 * n)
    if rng.random() < 0.2:      # the mapping search's keys (qsim/npu/mapping/policy.py)
        base["mapping"] = rng.choice(('"search"', '"fixed"', '"SEARCH"', '"best"', "1", '""'))
        if rng.random() < 0.7:
            base["mapping_objective"] = rng.choice(('"edp"', '"cycles"', '"energy"', '"speed"', "2"))
    for key in list(base):
        if rng.random() < 0.15:
            base[key] = rng.choice(TOML_VALUES)
        if rng.random() < 0.03:
            del base[key]
    if rng.random() < 0.05:
        base["bogus"] = "1"
    if rng.random() < 0.1:      # several cores (1..16; not with the dram keys)
        base["cores"] = rng.choice(TOML_VALUES + ("2", "16", "17"))
    lines += [f"{k} = {v}" for k, v in base.items()]
    if rng.random() < 0.05:
        lines.append("[other]\nx = 1")
    return ("\n".join(lines) + "\n").encode()


def gen_npu_config(rng: random.Random, corpus: Corpus) -> Case:
    if rng.random() < 0.6:
        blob, kind = random_toml(rng), "generated"
    else:
        blob, how = mutate.mutate_text(rng, corpus.toml)
        kind = f"mutated:{how}"
    files = {"npu.toml": blob}
    where = rng.random()
    if where < 0.85:
        return Case("npu-config", kind, files, call="load_config", call_arg="npu.toml")
    files.update(_under("q", corpus.quantized["q"]))
    files["x.npy"] = corpus.x
    if where < 0.93:
        return Case("npu-config", kind + ":export-vectors", files, timeout_s=60,
                    argv=["export-vectors", "q", "--config", "npu.toml", "--out", "v", "--input", "x.npy"])
    if where < 0.995:
        return Case("npu-config", kind + ":simulate", files, timeout_s=60,
                    argv=["simulate", "q", "--engine", "model", "--config", "npu.toml", "-o", "s",
                          "--input", "x.npy", "-q"])
    return Case("npu-config", kind + ":export-rtl", files, timeout_s=120, address_space_bytes=RTL_ADDRESS_SPACE,
                argv=["export-rtl", "--config", "npu.toml", "--out", "r"])
