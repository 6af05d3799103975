"""qsim.userdata: .npy/.npz files read without trusting them, and the NaN/inf policy."""
import io
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.errors import DataError
from qsim.userdata import check_finite, first_bad_float, read_npy, read_npz


def _npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


GOOD = _npy_bytes(np.arange(24, dtype=np.float32).reshape(2, 3, 4))


@settings(derandomize=True, deadline=None, max_examples=400)
@given(st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(0, 2), st.binary(max_size=8)),
                min_size=1, max_size=6))
def test_damaged_npy_is_a_data_error_or_a_whole_array(tmp_path_factory, edits):
    """Any overwrite/cut/insert in a good file: read_npy gives an array of the size its header
    declares, or a DataError; never another exception."""
    data = bytearray(GOOD)
    for position, kind, chunk in edits:
        if kind == 0:
            data[position:position + len(chunk)] = chunk
        elif kind == 1:
            del data[position:position + len(chunk) + 1]
        else:
            data[position:position] = chunk
    path = tmp_path_factory.mktemp("npy") / "f.npy"
    path.write_bytes(bytes(data))
    try:
        array = read_npy(path, "--input")
    except DataError as err:
        assert str(path) in err.message
    else:
        assert array.dtype.kind in "biuf" and array.nbytes <= len(data)


@pytest.mark.parametrize("array", [np.arange(6, dtype=np.int8).reshape(2, 3),
                                   np.asfortranarray(np.arange(6.0).reshape(2, 3)),
                                   np.zeros((0, 4), np.float32), np.array(True), np.float16([1.5])])
def test_good_npy_reads_back_exactly(tmp_path, array):
    np.save(tmp_path / "a.npy", array)
    got = read_npy(tmp_path / "a.npy")
    assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)


def test_npy_size_is_checked_before_reading(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1K")
    np.save(tmp_path / "a.npy", np.zeros(1000, np.float32))
    with pytest.raises(DataError, match=r"would take 3.91 KiB, over the 1 KiB limit"):
        read_npy(tmp_path / "a.npy")


def test_npz_members_are_checked_each(tmp_path, monkeypatch):
    np.savez(tmp_path / "ok.npz", x=np.ones((2, 2), np.float32), y=np.arange(2))
    arrays = read_npz(tmp_path / "ok.npz")
    assert sorted(arrays) == ["x", "y"] and arrays["y"].tolist() == [0, 1]
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        z.writestr("x.npy", GOOD[:-10])
    with pytest.raises(DataError, match=r"bad.npz\[x\]: the header declares \[2, 3, 4\] float32 "
                                        r"\(96 bytes\), the file holds 86 bytes"):
        read_npz(tmp_path / "bad.npz")
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "64")
    with pytest.raises(DataError, match=r"ok.npz\[x\] of shape \[144\]"):   # the member's size
        read_npz(tmp_path / "ok.npz")


@pytest.mark.parametrize("values,index,text", [
    ([[0.0, 1.0], [np.nan, np.inf]], (1, 0), "is NaN"),
    ([[0.0, -np.inf], [np.nan, 1.0]], (0, 1), "is infinite"),
    ([[0.0, 1.0], [3.5e38, 0.0]], (1, 0), r"is 3.5e\+38, beyond float32.s range"),
])
def test_first_bad_float_names_the_first_index_in_c_order(values, index, text):
    array = np.array(values, np.float64)
    assert first_bad_float(array)[0] == index
    with pytest.raises(DataError, match=rf"t: element \[{index[0]}, {index[1]}\] {text}"):
        check_finite(array, "t")


def test_finite_and_integer_data_pass():
    check_finite(np.array([3.4e38, -3.4e38], np.float64), "t")     # inside float32's range
    check_finite(np.array([2**62], np.int64), "t")
    assert first_bad_float(np.zeros(0, np.float32)) is None


@pytest.mark.parametrize("text,toml,depth", [
    ('{"a": [1, {"b": []}]}', False, 4),
    ('{"a": "[[[\\"[[", "b": [1]}', False, 2),            # brackets in strings, escaped quote
    ('a = """x [[ \\""" ]]""" # [[[\nb = [[1]]', True, 2),  # TOML multi-line string, comment
    ("a = '''[[''' \nb = '[' # {{{\n[t]\n[[u]]", True, 2),  # literal strings; table headers
])
def test_nesting_depth_skips_strings_and_comments(text, toml, depth):
    from qsim.userdata import nesting_depth
    assert nesting_depth(text, toml=toml) == depth


def test_deep_toml_is_refused_before_tomllib_recurses(tmp_path):
    from qsim.npu.config import load_config
    deep = tmp_path / "deep.toml"
    deep.write_text("[npu]\nrows = " + "[" * 100000 + "]" * 100000 + "\n")
    with pytest.raises(DataError, match="nested more than 200 levels deep") as info:
        load_config(deep)
    assert info.value.location.file == str(deep)


# ------------------------------------------------------------------ pipes (--input <(cat x.npy))

def _through_pipe(blob: bytes, read, *args, **kw):
    """`read(/dev/fd/N, ...)` where N is the read end of a real pipe a thread fills with `blob`
    (the path a shell gives for `<(cat x.npy)`)."""
    import os
    import threading
    r, w = os.pipe()

    def feed():
        try:
            os.write(w, blob) if len(blob) < 4096 else [os.write(w, blob[i:i + 4096])
                                                        for i in range(0, len(blob), 4096)]
        except BrokenPipeError:
            pass            # the reader stopped early (a bad header): nothing more to give
        finally:
            os.close(w)
    thread = threading.Thread(target=feed)
    thread.start()
    try:
        return read(f"/dev/fd/{r}", *args, **kw)
    finally:
        os.close(r)
        thread.join()


@settings(derandomize=True, deadline=None, max_examples=60)
@given(st.sampled_from(["float32", "int8", "uint16", "bool", "float64"]),
       st.lists(st.integers(0, 5), min_size=0, max_size=4))
def test_npy_through_a_pipe_reads_as_from_a_file(dtype, shape):
    array = (np.arange(int(np.prod(shape)) if shape else 1) % 3).astype(dtype).reshape(shape)
    got = _through_pipe(_npy_bytes(array), read_npy, "--input")
    assert got.dtype == array.dtype and got.shape == array.shape and np.array_equal(got, array)


def test_npz_and_npy_through_a_pipe_are_told_apart_by_content():
    from qsim.userdata import read_npy_or_npz
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ones((2, 3), np.float32), y=np.arange(2))
    archive = _through_pipe(buffer.getvalue(), read_npy_or_npz, "--calib")
    assert sorted(archive) == ["x", "y"] and np.array_equal(archive["y"], np.arange(2))
    assert _through_pipe(buffer.getvalue(), read_npz, "--calib")["x"].shape == (2, 3)
    assert np.array_equal(_through_pipe(GOOD, read_npy_or_npz), np.load(io.BytesIO(GOOD)))
    with pytest.raises(DataError, match="a .npz archive, not one .npy array"):
        _through_pipe(buffer.getvalue(), read_npy, "--input")


def test_a_truncated_or_oversized_pipe_is_a_data_error(monkeypatch):
    with pytest.raises(DataError, match=r"ends after 10 of 96 data bytes"):
        _through_pipe(GOOD[:len(GOOD) - 86], read_npy, "--input")
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "64")
    with pytest.raises(DataError, match="limit on one tensor"):      # the header is checked first
        _through_pipe(GOOD, read_npy, "--input")
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ones(100, np.float32))
    with pytest.raises(DataError, match="an archive read from a pipe is held in memory"):
        _through_pipe(buffer.getvalue(), read_npz, "--calib")


def test_cli_run_and_quantize_read_pipes(tmp_path, capsys):
    """`qsim run --input <(cat x.npy)` and `qsim quantize --calib <(cat c.npz)` as a shell runs them."""
    import subprocess
    import sys
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 2, 3)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "c.npz", x=np.repeat(x, 4, axis=0))
    script = (f"cd {tmp_path} && {sys.executable} -m qsim run m.onnx --input <(cat x.npy) --output y.npy && "
              f"{sys.executable} -m qsim quantize m.onnx --calib <(cat c.npz) -o q -q")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), np.maximum(x, 0))
    assert (tmp_path / "q" / "main.sknd").is_file()
