"""qsim.load reads tensor files only inside the model (issue 11 part 6), for both front ends:
a SkriptND model's `<variable>.dat` and an NNEF 1.0 variable's `<label>.dat` that are symbolic
links out of the folder are refused, naming the link and where it leads."""
import os

import numpy as np
import pytest

import qsim
from qsim.errors import DataError
from qsim.tensorfile import write_tensor

SKRIPTND = """import math;
graph G {
    @input {
        x: real[1, 3];
    }
    @output {
        y: real[1, 3];
    }
    @variable {
        w: real[1, 3];
    }
    @compose {
        y = math.add(x, w);
    }
}
"""
NNEF1 = """version 1.0;
graph G( x ) -> ( y )
{
    x = external(shape = [1, 3]);
    w = variable(shape = [1, 3], label = 'w');
    y = add(x, w);
}
"""


@pytest.mark.parametrize("graph_file, text", [("main.sknd", SKRIPTND), ("graph.nnef", NNEF1)],
                         ids=["skriptnd", "nnef1"])
def test_tensor_file_linked_out_of_the_model_is_refused(tmp_path, graph_file, text):
    model = tmp_path / "model"
    model.mkdir()
    (model / graph_file).write_text(text)
    write_tensor(tmp_path / "outside.dat", np.float32([[1, 2, 3]]))
    os.symlink(tmp_path / "outside.dat", model / "w.dat")
    with pytest.raises(DataError) as err:
        qsim.load(str(model))
    assert f"names {model / 'w.dat'}, which resolves to {tmp_path / 'outside.dat'}, outside the model folder" \
        in err.value.message
    # the same file inside the folder loads
    os.unlink(model / "w.dat")
    write_tensor(model / "w.dat", np.float32([[1, 2, 3]]))
    graph = qsim.load(str(model))
    assert any(t.data is not None and t.data.tolist() == [[1, 2, 3]] for t in graph.tensors.values())


def test_an_imported_module_that_links_out_of_the_model_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "ops.sknd").write_text("import math;\noperator twice {\n    @input { x: real[n]; }\n"
                                      "    @output { y: real[n]; }\n"
                                      "    @compose { y = math.add(x, x); }\n}\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "main.sknd").write_text(
        "import math;\nimport ops;\ngraph G {\n    @input { x: real[3]; }\n"
        "    @output { y: real[3]; }\n    @compose { y = ops.twice(x); }\n}\n")
    os.symlink(outside / "ops.sknd", model / "ops.sknd")
    with pytest.raises(DataError, match=r"import 'ops' names .*ops.sknd, which resolves to .*elsewhere"
                                        r".*outside the model folder"):
        qsim.load(str(model))
    # the same module inside the folder is fine
    os.unlink(model / "ops.sknd")
    (model / "ops.sknd").write_text((outside / "ops.sknd").read_text())
    g = qsim.load(str(model))
    assert [op.kind.name for op in g.ops] == ["math.add"]
