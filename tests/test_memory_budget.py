"""One memory budget for a whole command (qsim.limits.max_memory, --max-memory, $QSIM_MAX_MEMORY):
constants folded at import, tensors live at run time and decoded images are counted, and the
piece that would pass the budget is refused before it is allocated, with a message naming what
holds the memory and how to raise the budget. The models here would need several GB; each run
is a subprocess whose peak memory (ru_maxrss) must stay far below that."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qsim import limits
from qsim.errors import DataError, UsageError

GIB = 1 << 30

# runs `python -m qsim ARGS` as a child, under an optional address-space limit, and prints its
# exit code, stderr and peak resident memory (KiB) as JSON
RUNNER = """
import json, resource, subprocess, sys
limit = int(sys.argv[1])
def cap():
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
done = subprocess.run([sys.executable, "-m", "qsim", *sys.argv[2:]], capture_output=True, text=True, preexec_fn=cap)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": done.returncode, "err": done.stderr, "peak_kib": peak}))
"""


def run_qsim(*argv, cwd, address_space: int = 0) -> dict:
    done = subprocess.run([sys.executable, "-c", RUNNER, str(address_space), *argv], cwd=cwd,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def save(tmp_path, name, nodes, inits, opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(tmp_path / name))
    return name


def constants_model(tmp_path, count=3, floats=GIB // 4):
    """`count` ConstantOfShape of `floats` float32 each, and their Concat: a few hundred bytes that
    fold to count x floats x 4 bytes at import (and as much again for the Concat)."""
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("ConstantOfShape", ["s"], [f"c{i}"], value=fill) for i in range(count)]
    nodes.append(helper.make_node("Concat", [f"c{i}" for i in range(count)], ["y"], axis=0))
    return save(tmp_path, "constants.onnx", nodes, [numpy_helper.from_array(np.array([floats], np.int64), "s")])


def expands_model(tmp_path, floats=GIB // 8):
    """Three Expand of the input to `floats` float32 each, summed: nothing folds, the run holds them."""
    nodes = [helper.make_node("Expand", ["x", "s"], [f"e{i}"]) for i in range(3)]
    nodes += [helper.make_node("Add", ["e0", "e1"], ["a"]), helper.make_node("Add", ["a", "e2"], ["y"])]
    return save(tmp_path, "expands.onnx", nodes, [numpy_helper.from_array(np.array([floats], np.int64), "s")])


def test_budget_from_environment_and_default(monkeypatch):
    monkeypatch.delenv(limits.MAX_MEMORY_ENV, raising=False)
    monkeypatch.setattr(limits, "usable_memory", lambda: 10 * GIB)
    assert limits.max_memory() == 5 * GIB
    monkeypatch.setenv(limits.MAX_MEMORY_ENV, "3G")
    assert limits.max_memory() == 3 * GIB
    monkeypatch.setenv(limits.MAX_MEMORY_ENV, "much")
    with pytest.raises(UsageError, match="QSIM_MAX_MEMORY"):
        limits.max_memory()


def test_usable_memory_follows_an_address_space_limit():
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from qsim import limits; print(limits.usable_memory(), limits.max_memory())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**__import__("os").environ, limits.MAX_MEMORY_ENV: ""})
    assert done.stdout.split() == [str(3 << 30), str(3 << 29)]


def test_check_tensor_size_counts_the_active_use(monkeypatch):
    monkeypatch.setenv(limits.MAX_MEMORY_ENV, "1M")
    use = limits.MemoryUse("the test's tensors")
    assert limits.check_tensor_size([1 << 20], 1, "t") == 1 << 20      # no use active: the per-tensor limit only
    with limits.counting(use):
        use.add(600 << 10)
        limits.check_tensor_size([400 << 10], 1, "t")
        with pytest.raises(DataError) as err:
            limits.check_tensor_size([500 << 10], 1, "big")
    assert "big of shape [512000] would take 500 KiB more, with 600 KiB already held by the test's tensors" \
        in err.value.message and "1 MiB memory budget" in err.value.message
    assert "--max-memory" in err.value.hint and "QSIM_MAX_MEMORY" in err.value.hint
    assert limits.active_use() is None


def test_constants_folded_at_import_are_refused_before_allocating(tmp_path):
    model = constants_model(tmp_path)                  # would hold 3 GiB, and 3 more for the Concat
    out = run_qsim("--max-memory", "1500M", "check", model, cwd=tmp_path)
    assert out["rc"] == 2, out["err"]
    assert "ConstantOfShape_1" in out["err"] and "held by the constants of the model import" in out["err"]
    assert "1.46 GiB memory budget" in out["err"] and "--max-memory" in out["err"]
    assert out["peak_kib"] < 1.5 * GIB / 1024          # the first constant (1 GiB) and no more
    assert "Traceback" not in out["err"]


def test_the_default_budget_holds_under_an_address_space_limit(tmp_path):
    """No option: under `ulimit -v 3G` the default budget (half of that) refuses the second
    constant, where the MemoryError of a 3 GiB address space would have come later."""
    model = constants_model(tmp_path, floats=GIB // 8)   # 512 MiB each
    out = run_qsim("check", model, cwd=tmp_path, address_space=3 * GIB)
    assert out["rc"] == 2 and "1.5 GiB memory budget" in out["err"], out["err"]
    assert "MemoryError" not in out["err"] and "Traceback" not in out["err"]


def test_tensors_live_at_run_time_are_refused_before_allocating(tmp_path):
    model = expands_model(tmp_path)                    # three 512 MiB expansions live at once, then sums
    np.save(tmp_path / "x.npy", np.ones(1, np.float32))
    out = run_qsim("--max-memory", "800M", "run", model, "--input", "x.npy", cwd=tmp_path)
    assert out["rc"] == 2, out["err"]
    assert "outputs of layout.broadcast 'Expand_1'" in out["err"]
    assert "held by the live tensors of graph 'g'" in out["err"] and "800 MiB memory budget" in out["err"]
    assert out["peak_kib"] < 0.8 * GIB / 1024
    # with room for it, the same model runs
    small = expands_model(tmp_path, floats=1 << 20)
    assert run_qsim("--max-memory", "800M", "run", small, "--input", "x.npy", cwd=tmp_path)["rc"] == 0


def png_header_only(width: int, height: int) -> bytes:
    """A ~70-byte PNG whose header declares width x height RGB pixels (its data is a stub)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 50))
            + chunk(b"IEND", b""))


def image_model(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    return "m.onnx"


@pytest.mark.parametrize("width, height, budget, message", [
    (100000, 100000, None, "declares more pixels than any decoder should allocate"),
    (12000, 12000, "1G", "decoding image imgs/b.png (12000 x 12000, 3 channel(s)) would take"),
])
def test_an_image_bomb_in_a_calibration_folder_is_refused_from_its_header(tmp_path, width, height, budget, message):
    import matplotlib.pyplot as plt
    (tmp_path / "imgs").mkdir()
    plt.imsave(tmp_path / "imgs" / "a.png", np.random.default_rng(0).random((8, 8, 3)))
    (tmp_path / "imgs" / "b.png").write_bytes(png_header_only(width, height))
    argv = (["--max-memory", budget] if budget else []) + ["quantize", image_model(tmp_path), "--calib", "imgs",
                                                           "-o", "q", "-q"]
    out = run_qsim(*argv, cwd=tmp_path)
    assert out["rc"] == 2 and message in out["err"], out["err"]
    assert "imgs/b.png" in out["err"] and "Traceback" not in out["err"]
    assert out["peak_kib"] < 0.5 * GIB / 1024          # 3.8 GiB before
    assert not (tmp_path / "q").exists()


def test_images_within_the_budget_decode_as_before(tmp_path):
    """The header check does not change what a folder of real images gives."""
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt
    from qsim.quant.data import load_samples
    rng = np.random.default_rng(1)
    (tmp_path / "imgs").mkdir()
    for i in range(3):
        plt.imsave(tmp_path / "imgs" / f"i{i}.png", rng.random((8, 8, 3)))
    samples = load_samples(tmp_path / "imgs", "x", (3, 8, 8))
    for i in range(3):
        expected = np.asarray(mpimg.imread(tmp_path / "imgs" / f"i{i}.png"), np.float32)[:, :, :3].transpose(2, 0, 1)
        assert samples.inputs[i].tobytes() == expected.tobytes()
