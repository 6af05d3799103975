"""qsim.outpath: which outputs may be written, checked against an independent oracle."""
import os

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from qsim.errors import UsageError
from qsim.outpath import QUANTIZED_MODEL, check_output

PARTS = ["a", "b", "ab", "a.b", "..", ".", "link", "m", "graph.nnef"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """a/ b/ ab/ m/graph.nnef, and link -> a (names that share prefixes, a symbolic link)."""
    root = tmp_path_factory.mktemp("tree")
    for d in ("a/b", "ab", "b", "m"):
        (root / d).mkdir(parents=True)
    (root / "m" / "graph.nnef").write_text("version 1.0;")
    (root / "link").symlink_to(root / "a", target_is_directory=True)
    return root


def _overlaps(out, given) -> bool:
    """The oracle: pathlib's resolve and is_relative_to (a main file stands for its folder)."""
    out, given = out.resolve(), given.resolve()
    if given.name == "graph.nnef" and given.is_file():
        given = given.parent
    return out.is_relative_to(given) or given.is_relative_to(out)


relative = st.lists(st.sampled_from(PARTS), min_size=1, max_size=4).map(lambda p: os.path.join(*p))


@settings(derandomize=True, deadline=None, max_examples=300,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(out=relative, given=st.sampled_from(["a", "a/b", "ab", "b", "m", "m/graph.nnef", "link",
                                           "link/b", "a/../ab", "."]))
def test_refused_exactly_when_output_and_input_overlap(tree, out, given):
    out_path, in_path = tree / out, tree / given
    if not out_path.resolve().is_relative_to(tree):
        return                                           # (never write outside the test tree)
    expect = _overlaps(out_path, in_path)
    event("overlap" if expect else "apart")
    try:
        check_output(out_path, "-o", [("model", in_path)])
        refused = False
    except UsageError as err:                    # (also refused: a file where a folder goes)
        refused = "would replace or alter it" in err.message
    assert refused == expect, (out, given)


def test_replaces_only_earlier_outputs(tmp_path):
    (tmp_path / "empty").mkdir()
    check_output(tmp_path / "empty", "-o", replaces=QUANTIZED_MODEL)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "quantization.json").write_text("{}")
    check_output(tmp_path / "old", "-o", replaces=QUANTIZED_MODEL)
    with pytest.raises(UsageError, match="not an earlier qsim quantize output"):
        check_output(tmp_path, "-o", replaces=QUANTIZED_MODEL)
