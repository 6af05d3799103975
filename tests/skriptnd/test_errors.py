"""Malformed SkriptND models: each gives a located, readable error (issue 3).

Every case is a whole model folder (main.sknd, and .dat files where the case is about data). The
expected location is where the offending text is in the document: the test finds the `at` text
in the document and requires the error's file:line:column to point at it (or at the line
holding it, for errors about a declaration), and the message to contain `needle`.
Categories: type, binding, assertion, unknown module/operator, semantic (composition), data
(.dat header, size, shape), @quantize. Syntax errors are in test_parser.py, definition errors in
test_validate.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import qsim
from qsim.errors import DataError, QsimError
from qsim.tensorfile import write_tensor

HEAD = "import nn;\nimport math;\nimport layout;\n"


def graph(body: str, inputs: str = "x: real[1, 3, 8, 8];", outputs: str = "y: real[1, 4, 8, 8];",
          variables: str = "", extra: str = "") -> str:
    var = f"    @variable {{\n        {variables}\n    }}\n" if variables else ""
    return (HEAD + extra + "graph G {\n"
            f"    @input {{\n        {inputs}\n    }}\n"
            f"    @output {{\n        {outputs}\n    }}\n" + var +
            "    @compose {\n" + "".join(f"        {line}\n" for line in body.strip().split("\n")) +
            "    }\n}\n")


W = "w: real[4, 3, 3, 3];"
CONV = "y = nn.conv{padding = [1, 1, 1, 1]}(x, w);"

# (id, document, text the location points at, message needle, whole-line location?)
CASES = [
    # -- types
    ("int-input-to-real", graph("y = nn.relu(i);", inputs="i: int[1, 4, 8, 8];"), "nn.relu(i)",
     "input 'x' must be a real tensor, got int tensor 'i'", False),
    ("real-attribute-for-int", graph("y = nn.conv{stride = 1.5, padding = [1, 1, 1, 1]}(x, w);", variables=W),
     "stride = 1.5", "attribute 'stride' must be int", False),
    ("output-declared-int", graph("y = nn.relu(x);", outputs="y: int[1, 3, 8, 8];"), "y: int[1, 3, 8, 8];",
     "output 'y' is declared int but composed as real", False),
    ("bool-where-int", graph("y = layout.transpose{perm = true}(x);", outputs="y: real[1, 3, 8, 8];"),
     "perm = true", "attribute 'perm' must be int", False),
    ("string-for-real", graph("y = nn.relu{alpha = 'a'}(x);", outputs="y: real[1, 3, 8, 8];"),
     "alpha = 'a'", "attribute 'alpha' must be real", False),
    # -- binding (shapes)
    ("conv-channels-disagree", graph(CONV, variables="w: real[4, 5, 3, 3];"), "nn.conv{",
     "input-channels must equal filter-channels * groups\n    input-channels = 3\n    filter-channels = 5", False),
    ("conv-rank", graph("y = nn.conv{padding = [1, 1]}(x, w);", inputs="x: real[3, 8];", variables=W),
     "nn.conv{", "input 'filter' has rank 4, the operator declares rank 2", False),
    ("linear-inner-extent", graph("y = nn.linear(x, w);", inputs="x: real[2, 7];", outputs="y: real[2, 4];",
                                  variables="w: real[4, 6];"), "nn.linear(",
     "'c' is 7 but 6 from dimension 1 of input 'filter'", False),
    ("output-shape", graph("y = nn.relu(x);", outputs="y: real[1, 3, 9, 8];"), "y: real[1, 3, 9, 8];",
     "declared with shape [1, 3, 9, 8] but the composition gives [1, 3, 8, 8]", False),
    ("dynamic-without-bound", graph("y = nn.relu(x);", inputs="x: real[1, 3, ~, 8];",
                                    outputs="y: real[1, 3, ~, 8];"), "~, 8]", "needs an upper bound", False),
    # -- assertions (the operator's message and listed values, naming the invocation)
    ("conv-stride-zero", graph("y = nn.conv{stride = [0, 1], padding = [1, 1, 1, 1]}(x, w);", variables=W),
     "nn.conv{stride", "'stride' must be positive\n    stride = [0, 1]", False),
    ("split-sizes", graph("a, b = layout.split{axis = 1, sizes = [1, 1]}(x);\ny = nn.relu(a);",
                          outputs="y: real[1, 1, 8, 8];"), "layout.split{",
     "sum of 'sizes' must equal input extent at dimension 'axis'\n    input.shape = [1, 3, 8, 8]", False),
    ("relu-alpha-range", graph("y = nn.relu{alpha = 2.0}(x);", outputs="y: real[1, 3, 8, 8];"),
     "nn.relu{", "'alpha' must be between 0 and 1", False),
    ("user-assert-formatted", graph("y = check{k = -2}(x);", outputs="y: real[1, 3, 8, 8];", extra=(
        "operator check {\n    @attrib { k: int; }\n    @input { x: real[s..]; }\n"
        "    @output { y: real[s..]; }\n    @assert { k > 0: \"k must be positive, got {k}\", k; }\n"
        "    @compose { y = nn.relu(x); }\n}\n")), "check{k", "k must be positive, got -2", False),
    # -- unknown module / operator
    # an unknown import is an error where the graph first uses it (an unused one is a note, docs/skriptnd.md)
    ("unknown-module", graph("y = layouts.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "import layout;", "import layouts;"), "layouts.relu(", "unknown module 'layouts'", False),
    ("unknown-operator", graph("y = nn.rellu(x);", outputs="y: real[1, 3, 8, 8];"), "nn.rellu(",
     "module 'nn' has no operator 'rellu'", False),
    ("module-not-imported", graph("y = image.nearest_upsample{factor = [2, 2]}(x);",
                                  outputs="y: real[1, 3, 16, 16];"), "image.nearest_upsample",
     "module 'image' is not imported", False),
    ("unqualified-operator", graph("y = relu(x);", outputs="y: real[1, 3, 8, 8];"), "relu(x)",
     "unknown operator 'relu'", False),
    ("unknown-attribute", graph("y = nn.relu{slope = 0.1}(x);", outputs="y: real[1, 3, 8, 8];"),
     "slope = 0.1", "'nn.relu' has no attribute 'slope'", False),
    ("too-many-inputs", graph("y = nn.relu(x, x);", outputs="y: real[1, 3, 8, 8];"), "nn.relu(x, x)",
     "takes 1 inputs, 2 given", False),
    # -- composition semantics
    ("attribute-twice", graph("y = nn.relu{alpha = 0.1, alpha = 0.2}(x);", outputs="y: real[1, 3, 8, 8];"),
     "alpha = 0.2", "attribute 'alpha' is given twice", False),
    ("redefined-intermediate", graph("t = nn.relu(x);\nt = nn.relu(t);\ny = nn.relu(t);",
                                     outputs="y: real[1, 3, 8, 8];"), "t = nn.relu(t)", "'t' is already defined",
     False),
    ("output-never-assigned", graph("t = nn.relu(x);", outputs="y: real[1, 3, 8, 8];"), "y: real[1, 3, 8, 8];",
     "output 'y' is never assigned", False),
    ("variable-assigned-in-compose", graph("w = nn.relu(x);\ny = nn.relu(x);", outputs="y: real[1, 3, 8, 8];",
                                           variables="w: real[1, 3, 8, 8];"), "w = nn.relu",
     "variable 'w' can only be assigned in @update", False),
    ("unknown-identifier", graph("y = nn.relu(z);", outputs="y: real[1, 3, 8, 8];"), "z);",
     "unknown identifier 'z'", False),
    ("graph-attribute-without-default", graph("y = nn.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "graph G {\n", "graph G {\n    @attrib {\n        n: int;\n    }\n"), "n: int;",
     "attribute 'n' has no default", False),
    ("unpack-count", graph("a, b, c = layout.split{axis = 1, count = 2}(x);\ny = nn.relu(a);",
                           inputs="x: real[1, 4, 8, 8];", outputs="y: real[1, 2, 8, 8];"), "a, b, c",
     "3 names on the left but 1 results", False),
    # -- @quantize
    ("quantize-unknown-tensor", graph("y = nn.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "    }\n}\n", "    }\n    @quantize {\n        z: quant.zero_point_linear_quantize{zero_point = 0, scale = 0.5, bits = 8};\n    }\n}\n")
     .replace("import nn;", "import nn;\nimport quant;"), "z: quant", "names 'z', which is not an accessible tensor",
     False),
    ("quantize-negative-scale", graph("y = nn.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "    }\n}\n", "    }\n    @quantize {\n        y: quant.zero_point_linear_quantize{zero_point = 0, scale = -0.5, bits = 8};\n    }\n}\n")
     .replace("import nn;", "import nn;\nimport quant;"), "y: quant", "scale must be positive", False),
    ("quantize-missing-bits", graph("y = nn.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "    }\n}\n", "    }\n    @quantize {\n        y: quant.zero_point_linear_quantize{zero_point = 0, scale = 0.5};\n    }\n}\n")
     .replace("import nn;", "import nn;\nimport quant;"), "y: quant", "attribute 'bits'", False),
    ("quantize-channel-count", graph("y = nn.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "    }\n}\n", "    }\n    @quantize {\n        y: quant.zero_point_linear_quantize{zero_point = [0, 0], "
        "scale = [0.5, 0.25], bits = 8};\n    }\n}\n").replace("import nn;", "import nn;\nimport quant;"),
     "y: quant", "the extent is 3 but 2 from the length of attribute 'zero_point'", False),
    ("quantize-unknown-operator", graph("y = nn.relu(x);", outputs="y: real[1, 3, 8, 8];").replace(
        "    }\n}\n", "    }\n    @quantize {\n        y: quant.log_quantize{bits = 8};\n    }\n}\n")
     .replace("import nn;", "import nn;\nimport quant;"), "y: quant.log", "module 'quant' has no operator 'log_quantize'",
     False),
]


def locate(doc: str, text: str) -> tuple[int, int]:
    at = doc.index(text)
    line = doc.count("\n", 0, at) + 1
    return line, at - (doc.rfind("\n", 0, at) + 1) + 1


@pytest.mark.parametrize("doc,at,needle,whole_line", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_model_located(tmp_path, doc, at, needle, whole_line):
    (tmp_path / "main.sknd").write_text(doc)
    for name, dims in re.findall(r"^ +(\w+): real\[([0-9, ]+)\];$", doc.split("@variable")[-1], re.M):
        if "@variable" in doc:
            write_tensor(tmp_path / f"{name}.dat", np.zeros([int(d) for d in dims.split(",")], np.float32))
    with pytest.raises(QsimError) as err:
        qsim.load(tmp_path)
    e = err.value
    assert needle in e.message, e.format()
    assert e.location is not None, e.format()
    assert Path(e.location.file).name in ("main.sknd", ), e.format()
    line, col = locate(doc, at)
    assert e.location.line == line, e.format()
    if not whole_line:
        assert e.location.column == col, e.format()


def test_case_count():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


# -- data files ---------------------------------------------------------------------------------

DATA_DOC = graph(CONV, variables=W)


@pytest.fixture
def model(tmp_path):
    (tmp_path / "main.sknd").write_text(DATA_DOC)
    return tmp_path


def test_missing_data_file_located(model):
    with pytest.raises(DataError) as err:
        qsim.load(model)
    assert "no data file for variable 'w'" in err.value.message
    assert (err.value.location.line, err.value.location.column) == locate(DATA_DOC, W)
    assert "w.dat" in err.value.hint


def _bad_magic(path: Path):
    blob = bytearray(path.read_bytes())
    blob[0] = 0x00
    path.write_bytes(bytes(blob))


@pytest.mark.parametrize("shape,damage,needle", [
    ((4, 3, 3, 3), _bad_magic, "magic"),
    ((4, 3, 3, 3), lambda p: p.write_bytes(p.read_bytes()[:-4]),
     "header data length is 432 bytes but the file has 428 bytes"),
    ((4, 3, 3, 2), lambda p: None, "stored shape is [4, 3, 3, 2] but the graph declares [4, 3, 3, 3]"),
], ids=["bad-magic", "truncated", "shape-differs"])
def test_dat_errors_name_the_file(model, shape, damage, needle):
    write_tensor(model / "w.dat", np.zeros(shape, np.float32))
    damage(model / "w.dat")
    with pytest.raises(DataError) as err:
        qsim.load(model)
    assert err.value.location.file.endswith("w.dat")
    assert needle in err.value.message


def test_main_module_without_graph(tmp_path):
    (tmp_path / "main.sknd").write_text("import nn;\noperator a {\n    @input { x: real[n]; }\n"
                                        "    @output { y: real[n]; }\n    @compose { y = nn.relu(x); }\n}\n")
    with pytest.raises(QsimError, match="defines no graph"):
        qsim.load(tmp_path)
