"""Property: whatever the argument vector, `qsim.cli.main` returns 0, 1 or 2, or argparse exits
with 2 (0 for --help/--version); no other exception escapes, and no input file changes.

Argument vectors are generated from each command's real options, with values drawn from good
and bad paths (tiny models, NaN arrays, empty files, files in the way, /proc, the inputs
themselves as outputs) and bad numbers. The heavy stages that do not read arguments are kept
cheap: the NPU engine is the numpy model (or a bad name), models are tiny, and export-rtl's
Verilog generation is stubbed (its argument handling is what is under test).
"""
import hashlib
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from qsim.cli import main

from quant.test_pipeline import write_tiny_model    # conv + relu, input [1, 2, 6, 6]

ROOT_KEY = "{root}"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("props")
    rng = np.random.default_rng(3)
    write_tiny_model(root, rng, calib_count=4)
    nan = np.zeros((1, 2, 6, 6), np.float32)
    nan[0, 0, 1, 1] = np.nan
    np.save(root / "nan.npy", nan)
    (root / "empty.npy").write_bytes(b"")
    (root / "afile").write_text("x")
    (root / "bad.toml").write_bytes(b"[npu]\nrows = \xff\n")
    assert main(["quantize", str(root / "m"), "--calib", str(root / "c.npy"), "-o",
                 str(root / "q"), "-q"]) == 0
    return root


PATHS = ["m", "m/graph.nnef", "q", "x.npy", "c.npy", "nan.npy", "empty.npy", "afile",
         "afile/sub", "/proc/qsim-x", "missing", "out", "out/deeper", ".", "", "-", "bad.toml",
         "x=x.npy", "input=nan.npy", "nope=x.npy"]
NUMBERS = ["0", "1", "2", "-1", "abc", "1e3", "99999999999999999999", " 3", "0x10", ""]
CONFIGS = ["8x8", "16x16:os", "32x32:zz", "4x4", "bad.toml", "missing", "afile", ""]
SWEEPS = ["size=8", "size=8,16", "dataflow=ws,os", "rows=", "foo", "size=abc", "clock_mhz=nan",
          "size=8,8", "=", "rows=0"]

path = st.sampled_from(PATHS).map(lambda p: p if p.startswith("/") or p in ("", "-")
                                  else ROOT_KEY + "/" + p)
number = st.sampled_from(NUMBERS)
config = st.sampled_from(CONFIGS).map(lambda c: ROOT_KEY + "/" + c if c in ("bad.toml", "afile")
                                      else c)



def mix(*good):
    """Two times in three one of the `good` paths (so that commands also succeed), else any."""
    good = st.sampled_from([ROOT_KEY + "/" + g for g in good])
    return st.one_of(good, good, path)


# command -> (positional strategies, [(option, value strategy or None for a flag)])
COMMANDS = {
    "check": ([mix("m", "m/graph.nnef", "q")],
              [("--all", None), ("--graph", st.sampled_from(["g", "nope", ""])),
               ("--keep", st.sampled_from(["nn.conv", ",,", "x" * 300]))]),
    "run": ([mix("m", "q")], [("--input", mix("x.npy")), ("--input", path), ("--output", mix("o.npy")),
                              ("--dump", mix("dump")),
                              ("--backend", st.sampled_from(["kernels", "reference", "gpu"]))]),
    "quantize": ([mix("m")], [("--calib", mix("c.npy")), ("--eval", mix("c.npy")), ("-o", mix("out")),
                              ("--calib-limit", number), ("--eval-limit", number),
                              ("--target", st.sampled_from(["tosa", "cvm", "x"])),
                              ("--cvm-precision", number),
                              ("--precision", st.sampled_from(["int8", "16x8"])),
                              ("--observer", st.sampled_from(["minmax", "mse", "p"])),
                              ("--weight-rounding", st.sampled_from(["nearest", "adaptive"]))]),
    "simulate": ([mix("q")], [("--engine", st.sampled_from(["model", "bogus"])), ("--config", config),
                              ("--input", mix("x.npy")), ("-o", mix("sim")),
                              ("--sweep", st.sampled_from(SWEEPS)), ("--vcd", path)]),
    "export-vectors": ([mix("q")], [("--out", mix("vec")), ("--config", config),
                                    ("--input", mix("x.npy")), ("--corner-cases", number),
                                    ("--seed", number)]),
    "export-rtl": ([], [("--config", config), ("--out", mix("rtl"))]),
    "selftest": ([], [("--seed", st.sampled_from(["-1", "x", "0"]))]),
}


# options drawn every time (what a working call needs), before the optional ones
REQUIRED = {"run": ["--input"], "quantize": ["--calib"], "simulate": ["--input"],
            "export-vectors": ["--out", "--input"], "export-rtl": ["--out"]}


@st.composite
def argv(draw):
    command = draw(st.sampled_from(sorted(COMMANDS) + ["nonsense"]))
    if command == "nonsense":
        return [draw(st.sampled_from(["", "-x", "--version", "nonsense", "--max-tensor-bytes"]))]
    positional, options = COMMANDS[command]
    args = [command] + [draw(s) for s in positional if draw(st.booleans()) or command != "check"]
    for flag in REQUIRED.get(command, []):
        if draw(st.integers(0, 5)):                         # mostly given
            args += [flag, draw(dict(options)[flag])]
    for flag, value in draw(st.lists(st.sampled_from(options), max_size=3)):
        args += [flag] if value is None else [flag, draw(value)]
    if command == "simulate" and "--engine" not in args:
        args += ["--engine", "model"]         # never the verilator build
    if command in ("simulate", "quantize") and "-q" not in args:
        args.append("-q")
    if draw(st.booleans()):
        args = ["--max-tensor-bytes", draw(st.sampled_from(["4G", "1K", "garbage", "0"]))] + args
    return args


def _digest(root) -> str:
    h = hashlib.sha256()
    for name in ("m", "q", "x.npy", "c.npy", "nan.npy", "afile", "bad.toml"):
        top = root / name
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for f in files:
            h.update(str(f.relative_to(root)).encode() + f.read_bytes())
    return h.hexdigest()


@settings(derandomize=True, deadline=None, max_examples=100,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(args=argv())
def test_main_ends_in_an_exit_code_never_an_exception(root, monkeypatch, capsys, args):
    import qsim.npu.export
    monkeypatch.setattr(qsim.npu.export, "verilog_text", lambda geom: "// stub\n")
    monkeypatch.delenv("QSIM_MAX_TENSOR_BYTES", raising=False)
    monkeypatch.chdir(root)
    args = [a.replace(ROOT_KEY, str(root)) for a in args]
    before = _digest(root)
    try:
        code = main(args)
    except SystemExit as exit_info:                # argparse: usage errors, --help, --version
        assert exit_info.code in (0, 2), (args, exit_info.code)
        event(f"argparse exit {exit_info.code}")
    else:
        err = capsys.readouterr().err
        assert code in (0, 1, 2), (args, code)
        event(f"{next((a for a in args if a in COMMANDS), '-')} returned {code}")
        assert "Traceback" not in err
        if code == 1:                              # only a verification / selftest failure
            assert args[0] in ("simulate", "selftest"), (args, err)
    assert _digest(root) == before, args
