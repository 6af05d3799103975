"""The design space of qsim explore: command-line terms and the TOML [space] table, their
cartesian product, and clear errors (exit 2 from the CLI) for every malformed space."""
from __future__ import annotations

import pytest

from qsim.cli import main
from qsim.errors import DataError, UsageError
from qsim.explore.space import load_space, parse_terms, plan_target_db, space_terms_from_toml
from qsim.npu.config import load_config

BASE = load_config("16x16")


def test_terms_product_and_precisions():
    space = parse_terms(["size=8,16", "dataflow=ws,os", "precision=int8,16x8"], BASE)
    assert space.precisions == ("int8", "16x8")
    assert [c.name for c in space.configs] == ["8x8-ws", "8x8-os", "16x16-ws", "16x16-os"]
    assert [(c.rows, c.cols) for c in space.configs] == [(8, 8), (8, 8), (16, 16), (16, 16)]
    assert len(space.points) == 8
    assert space.points[0][0] == "int8" and space.points[4][0] == "16x8"


def test_default_precision_and_config():
    space = parse_terms(["dram_bytes_per_cycle=4,16"], BASE)
    assert space.precisions == ("int8",)
    assert [c.dram_bytes_per_cycle for c in space.configs] == [4, 16]
    assert all(c.rows == BASE.rows for c in space.configs)
    assert parse_terms(["precision=16x8"], BASE).configs == (BASE,)


def test_plan_precision():
    assert plan_target_db("sqnr:35") == 35.0
    assert plan_target_db("sqnr:32.5") == 32.5
    assert plan_target_db("int8") is None
    assert parse_terms(["precision=int8,sqnr:30"], BASE).precisions == ("int8", "sqnr:30")


@pytest.mark.parametrize("terms, words", [
    (["precision=int4"], "precision 'int4' is not int8, 16x8 or sqnr:DB"),
    (["precision=sqnr:abc"], "is not int8, 16x8 or sqnr:DB"),
    (["precision=int8,int8"], "a precision is repeated"),
    (["precision=int8", "precision=16x8"], "'precision' is given twice"),
    (["precision="], "is not KEY=V1,V2"),
    (["rows"], "--space term 'rows' is not KEY=V1,V2"),
    (["colour=red"], "--space key 'colour' is not a configuration key"),
    (["rows=8,x"], "--space rows='x': not a number"),
    (["rows=8,,16"], "is not KEY=V1,V2"),
    (["size=8,8"], "--space produces the same configuration twice"),
])
def test_term_errors(terms, words):
    with pytest.raises(UsageError) as err:
        parse_terms(terms, BASE)
    assert words in err.value.message
    assert err.value.hint


def test_toml_space(tmp_path):
    text = '[space]\nrows = [8, 16]\ncols = 8\ndataflow = ["ws", "os"]\nprecision = ["int8", "16x8"]\n'
    assert space_terms_from_toml(text, "s.toml") == ["rows=8,16", "cols=8", "dataflow=ws,os",
                                                    "precision=int8,16x8"]
    path = tmp_path / "s.toml"
    path.write_text(text)
    space = load_space(str(path), ["rows=32"], BASE)       # a term overrides the file's key
    assert [(c.rows, c.cols, c.dataflow.value) for c in space.configs] == [(32, 8, "ws"), (32, 8, "os")]
    assert space.precisions == ("int8", "16x8")


@pytest.mark.parametrize("text, words", [
    ("[space\nrows = [8]", "is not valid TOML"),
    ("rows = [8]\n", "no [space] table"),
    ("[space]\n", "no [space] table"),
    ("[space]\nrows = [8]\n[npu]\nrows = 8\n", "unknown table or key 'npu'"),
    ("[space]\ncolour = [1]\n", "key 'colour' is not a configuration key or precision"),
    ("[space]\nrows = []\n", "must be a non-empty list"),
    ("[space]\nrows = [true]\n", "must be a non-empty list of numbers or strings"),
    ("[space]\nrows = [[8]]\n", "must be a non-empty list of numbers or strings"),
    ('[space]\ndataflow = ["ws,os"]\n', "one with a comma"),
    ("[space]\nrows = " + "[" * 5000 + "]" * 5000 + "\n", "nested more than"),
], ids=lambda v: v[:40] if isinstance(v, str) else v)
def test_toml_errors(text, words):
    with pytest.raises(DataError) as err:
        space_terms_from_toml(text, "s.toml")
    assert words in err.value.message and "s.toml" in err.value.format()


def test_cli_errors_exit_2(tmp_path, capsys):
    assert main(["explore", "-o", str(tmp_path / "a")]) == 2
    assert "no design space" in capsys.readouterr().err
    assert main(["explore", "--space", "precision=int3", "-o", str(tmp_path / "b")]) == 2
    assert "precision 'int3'" in capsys.readouterr().err
    assert main(["explore", "--space-file", str(tmp_path / "missing.toml"), "-o", str(tmp_path / "c")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    assert main(["explore", "--space", "rows=8", "rows=16", "-o", str(tmp_path / "d")]) == 2
    assert "given twice" in capsys.readouterr().err
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_space_file_not_text(tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes(b"[space]\nrows = [8]\n\xff\xfe")
    with pytest.raises(DataError) as err:
        load_space(str(path), None, BASE)
    assert "not UTF-8 text (byte 19)" in err.value.message
