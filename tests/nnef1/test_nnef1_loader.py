"""Loading NNEF 1.0 models: folders, graph.nnef files, .tar/.tgz containers, variable data from
.dat files (plain and quantized), graph.quant, and located errors for broken inputs."""
import io
import tarfile

import numpy as np
import pytest

from qsim.errors import DataError, SemanticError, SyntaxError_, UnsupportedError, UsageError
from qsim.nnef1 import load_nnef1
from qsim.tensorfile import Quantizer, StoredQuantization, write_tensor

GRAPH = """version 1.0;

graph net( input ) -> ( output )
{
    input = external(shape = [1, 2, 4, 4]);
    filter = variable(shape = [3, 2, 3, 3], label = 'conv1/filter');
    bias = variable(shape = [1, 3], label = 'conv1/bias');
    conv = conv(input, filter, bias);
    output = relu(conv);
}
"""


def make_model(folder, rng, graph=GRAPH, quant=None, filter_data=None, **write_kwargs):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(graph)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32) if filter_data is None else filter_data
    b = rng.standard_normal((1, 3)).astype(np.float32)
    write_tensor(folder / "conv1" / "filter.dat", w, **write_kwargs)
    write_tensor(folder / "conv1" / "bias.dat", b)
    if quant is not None:
        (folder / "graph.quant").write_text(quant)
    return w, b


def test_folder_file_and_containers_give_the_same_graph(tmp_path, rng):
    w, b = make_model(tmp_path / "model", rng)
    g = load_nnef1(str(tmp_path / "model"))
    assert [op.kind.name for op in g.ops] == ["nn.conv", "nn.relu"]
    np.testing.assert_array_equal(g.tensor("filter").data, w)
    conv = g.ops[0]
    np.testing.assert_array_equal(g.tensor(conv.inputs[2]).data, b.reshape(3))
    assert g.inputs == ("input",) and g.outputs == ("output",)
    same = load_nnef1(str(tmp_path / "model" / "graph.nnef"))
    assert [op.kind.name for op in same.ops] == ["nn.conv", "nn.relu"]
    for suffix, mode, top in ((".tgz", "w:gz", ""), (".tar", "w", ""), (".tar.gz", "w:gz", "wrapped/")):
        archive = tmp_path / f"model{suffix}"
        with tarfile.open(archive, mode) as tar:
            for path in sorted((tmp_path / "model").rglob("*")):
                if path.is_file():
                    tar.add(path, arcname=top + str(path.relative_to(tmp_path / "model")))
        loaded = load_nnef1(str(archive))
        np.testing.assert_array_equal(loaded.tensor("filter").data, w)
        assert loaded.tensor("output").shape == (1, 3, 4, 4)


def test_graph_quant_attaches_quant_info(tmp_path, rng):
    quant = ('"input": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n'
             '"filter": min_max_linear_quantize(min = -1.0, max = 1.0, bits = 8, signed = true, symmetric = true);\n'
             '"conv": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
             "'output': zero_point_linear_quantize(zero_point = 3, scale = 0.25, bits = 8, signed = false);\n")
    make_model(tmp_path, rng, quant=quant)
    g = load_nnef1(str(tmp_path))
    q = g.tensor("input").quant
    # unsigned 8 bits over [0, 1]: scale 1/255, zero point 0
    assert (q.scale, q.zero_point, q.bits, q.signed, q.source) == (1 / 255, 0, 8, False, "graph.quant")
    # signed symmetric over [-1, 1]: r = 254 levels, scale 2/254, zero point -127 + 127 = 0
    q = g.tensor("filter").quant
    assert (q.scale, q.zero_point, q.signed, q.symmetric) == (2 / 254, 0, True, True)
    # unsigned over [-1, 1]: scale 2/255, zero point round(1 / (2/255)) = round(127.5) = 128
    q = g.tensor("conv").quant
    assert (q.scale, q.zero_point) == (2 / 255, 128)
    q = g.tensor("output").quant
    assert (q.scale, q.zero_point, q.signed) == (0.25, 3, False)


def test_quantized_tensor_file_gives_values_and_quant_info(tmp_path, rng):
    stored = StoredQuantization(Quantizer.LINEAR, -2.0, 2.0, 4)
    items = rng.integers(0, 15, size=(3, 2, 3, 3), endpoint=True)
    make_model(tmp_path, rng, filter_data=items, quantization=stored)
    g = load_nnef1(str(tmp_path))
    t = g.tensor("filter")
    np.testing.assert_allclose(t.data, items / 15 * 4.0 - 2.0, atol=1e-6)
    assert t.quant.source == "tensor file" and t.quant.bits == 4 and t.quant.scale == 4.0 / 15
    # a graph.quant line overrides the file's quantization for computation (7.1)
    (tmp_path / "graph.quant").write_text('"filter": linear_quantize(min = -1.0, max = 1.0, bits = 8);')
    assert load_nnef1(str(tmp_path)).tensor("filter").quant.source == "graph.quant"


def test_shared_labels_share_data(tmp_path, rng):
    graph = GRAPH.replace("    conv = conv(input, filter, bias);",
                          "    again = variable(shape = [3, 2, 3, 3], label = 'CONV1/filter');\n"
                          "    conv = conv(input, filter, bias) + conv(input, again, bias);")
    make_model(tmp_path, rng, graph=graph)
    g = load_nnef1(str(tmp_path))
    convs = [op for op in g.ops if op.kind.name == "nn.conv"]
    assert convs[0].inputs[1] == convs[1].inputs[1] == "filter"


CODES_GRAPH = """version 1.0;

graph codes( input ) -> ( output, n12, u3, flags )
{
    input = external(shape = [2, 3]);
    half = variable(shape = [2, 3], label = 'f/half');
    double = variable(shape = [2, 3], label = 'f/double');
    logq = variable(shape = [2, 3], label = 'q/log');
    n12 = variable<integer>(shape = [2, 3], label = 'i/n12');
    u3 = variable<integer>(shape = [2, 3], label = 'i/u3');
    flags = variable<logical>(shape = [2, 3], label = 'b/flags');
    output = input + half + double + logq;
}
"""


def test_variables_in_every_tensor_file_code(tmp_path, rng):
    """5.2 codes through a model folder: float16/64, logarithmic quantized, 12-bit signed and
    3-bit unsigned (bit-packed, widths not a multiple of 8) integers, 1-bit logical."""
    (tmp_path / "graph.nnef").write_text(CODES_GRAPH)
    half = np.float16([[0.5, -1.25, 3.0], [65504.0, 2.0 ** -24, 0.0]])
    double = np.float64([[1 / 3, 1e-3, -7.0], [0.1, 0.2, 0.3]])
    log = StoredQuantization(Quantizer.LOGARITHMIC, -4.0, 4.0, 4)
    n12 = np.int16([[-2048, 2047, 0], [-1, 1, 1000]])
    u3 = np.uint8([[0, 7, 3], [5, 1, 6]])
    flags = np.array([[True, False, True], [False, False, True]])
    write_tensor(tmp_path / "f" / "half.dat", half)
    write_tensor(tmp_path / "f" / "double.dat", double)
    write_tensor(tmp_path / "q" / "log.dat", np.float32([[-4.0, 0.5, 2.0], [-0.25, 1.0, -1.0]]),
                 quantization=log)
    write_tensor(tmp_path / "i" / "n12.dat", n12, bits=12)
    write_tensor(tmp_path / "i" / "u3.dat", u3, bits=3)
    write_tensor(tmp_path / "b" / "flags.dat", flags)
    assert (tmp_path / "i" / "u3.dat").stat().st_size == 128 + 3     # 6 items x 3 bits, packed
    g = load_nnef1(str(tmp_path))
    np.testing.assert_array_equal(g.tensor("half").data, half.astype(np.float32))
    np.testing.assert_array_equal(g.tensor("double").data, double.astype(np.float32))
    # powers of two are exact on the logarithmic grid (signed: 2^(q + m - r), m = 2, r = 7)
    np.testing.assert_array_equal(g.tensor("logq").data, np.float32([[-4, 0.5, 2], [-0.25, 1, -1]]))
    assert g.tensor("logq").quant is None       # no (scale, zero point) form; values only
    np.testing.assert_array_equal(g.tensor("n12").data, n12)
    np.testing.assert_array_equal(g.tensor("u3").data, u3)
    np.testing.assert_array_equal(g.tensor("flags").data, flags)


def test_container_with_graph_quant(tmp_path, rng):
    quant = '"conv": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n'
    make_model(tmp_path / "model", rng, quant=quant)
    archive = tmp_path / "model.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted((tmp_path / "model").rglob("*")):
            tar.add(path, arcname=str(path.relative_to(tmp_path / "model")))
    q = load_nnef1(str(archive)).tensor("conv").quant
    assert (q.scale, q.zero_point, q.source) == (2 / 255, 128, "graph.quant")


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("header, line, column, message", [
    ("version 2.0;", 1, 1, "document version 2.0: this reader reads NNEF 1.x"),
    ("version 1.0;\nextension KHR_enable_fragment_definitions VENDOR_magic;", 2, 43,
     "extension 'VENDOR_magic' is not supported"),
])
def test_unsupported_version_and_extension(tmp_path, rng, header, line, column, message):
    make_model(tmp_path, rng, graph=GRAPH.replace("version 1.0;", header))
    with pytest.raises(UnsupportedError) as err:
        load_nnef1(str(tmp_path))
    assert message in err.value.message
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == (str(tmp_path / "graph.nnef"), line, column)


def test_missing_tensor_file_names_the_variable(tmp_path, rng):
    make_model(tmp_path, rng)
    (tmp_path / "conv1" / "bias.dat").unlink()
    with pytest.raises(DataError) as err:
        load_nnef1(str(tmp_path))
    assert "variable 'conv1/bias' has no data file" in err.value.message
    assert str(tmp_path / "conv1" / "bias.dat") in err.value.message
    assert (err.value.location.line, err.value.location.column) == (7, 12)


def test_tensor_file_shape_mismatch(tmp_path, rng):
    make_model(tmp_path, rng, filter_data=np.zeros((3, 2, 5, 5), np.float32))
    with pytest.raises(DataError) as err:
        load_nnef1(str(tmp_path))
    text = str(err.value)
    assert "filter.dat: data error: stored shape is [3, 2, 5, 5] but the graph declares [3, 2, 3, 3]" in text
    assert "variable 'conv1/filter' declared at" in text and "graph.nnef:6:14" in text


def test_tensor_file_bad_header(tmp_path, rng):
    make_model(tmp_path, rng)
    path = tmp_path / "conv1" / "bias.dat"
    blob = bytearray(path.read_bytes())
    blob[1] = 0x00
    path.write_bytes(bytes(blob))
    with pytest.raises(DataError, match=r"bias.dat: data error: magic number is 0x4E 0x00, expected 0x4E 0xEF"):
        load_nnef1(str(tmp_path))


def test_tensor_file_of_the_wrong_kind(tmp_path, rng):
    make_model(tmp_path, rng, filter_data=np.zeros((3, 2, 3, 3), np.int8))
    with pytest.raises(DataError, match="holds integer items but variable 'conv1/filter' is tensor<scalar>"):
        load_nnef1(str(tmp_path))


@pytest.mark.parametrize("quant, line, column, cls, message", [
    ('"nothere": linear_quantize(min = 0.0, max = 1.0, bits = 8);', 1, 1, SemanticError,
     "'nothere' is not a tensor identifier of the graph"),
    ('"conv1/filter": linear_quantize(min = 0.0, max = 1.0, bits = 8);', 1, 1, SemanticError,
     "'conv1/filter' is not a tensor identifier"),
    ('\n"conv": linear_quantize(0.0, max = 1.0, bits = 8);', 2, 25, SemanticError,
     "'conv': linear_quantize has a positional argument"),
    ('"conv": cubic_quantize(min = 0.0, max = 1.0, bits = 8);', 1, 1, SemanticError,
     "unknown quantization operation 'cubic_quantize'"),
    ('"conv": linear_quantize(min = 0.0, bits = 8);', 1, 1, SemanticError,
     "linear_quantize needs argument 'max'"),
    ('"conv": linear_quantize(min = 0.0, max = 1.0, bits = 8, signed = true);', 1, 57, SemanticError,
     "linear_quantize has no parameter 'signed'"),
    ('"conv": linear_quantize(min = 0.0, max = conv, bits = 8);', 1, 42, SemanticError,
     "argument 'max' of linear_quantize is not a literal"),
    ('"conv": linear_quantize(min = 0.0, max = 1.0, bits = 8.5);', 1, 54, SemanticError,
     "argument 'bits' of linear_quantize is 8.5, expected integer"),
    ('"conv": linear_quantize(min = 1.0, max = 1.0, bits = 8);', 1, 1, SemanticError,
     "range [1.0, 1.0] is empty"),
    ('"conv": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n"conv": linear_quantize(min = 0.0, max = 2.0, bits = 8);',
     2, 1, SemanticError, "tensor 'conv' has two quantization lines"),
    ('"conv": logarithmic_quantize(max = 1.0, bits = 8);', 1, 1, UnsupportedError,
     "logarithmic quantization has no scale/zero-point form"),
    ('"conv": linear_quantize(min = 0.0, max = 1.0, bits = 8)\n', 2, 1, SyntaxError_, "unexpected end of file"),
])
def test_wrong_graph_quant_is_located(tmp_path, rng, quant, line, column, cls, message):
    make_model(tmp_path, rng, quant=quant)
    with pytest.raises(cls) as err:
        load_nnef1(str(tmp_path))
    assert message in err.value.message, err.value.message
    loc = err.value.location
    assert loc.file == str(tmp_path / "graph.quant")
    if cls is not SyntaxError_:
        assert (loc.line, loc.column) == (line, column), str(err.value)
    else:
        assert loc.line in (1, 2)


def test_missing_graph_and_bad_paths(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="graph.nnef is missing"):
        load_nnef1(str(tmp_path / "empty"))
    with pytest.raises(UsageError, match="no NNEF model at"):
        load_nnef1(str(tmp_path / "nothere"))
    broken = tmp_path / "broken.tgz"
    broken.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(DataError, match="cannot read container"):
        load_nnef1(str(broken))


def test_syntax_error_in_container_names_the_member(tmp_path):
    archive = tmp_path / "m.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"version 1.0;\ngraph g( x ) -> ( x ) { x = external(shape = [1]) }\n"
        info = tarfile.TarInfo("graph.nnef")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(SyntaxError_) as err:
        load_nnef1(str(archive))
    assert err.value.location.file == f"{archive}!graph.nnef" and err.value.location.line == 2
