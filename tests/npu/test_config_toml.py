"""npu.toml as qsim writes it (NpuConfig.to_toml, `qsim export-rtl`) reads back exactly, whatever
the configuration's name holds."""
import dataclasses
import tomllib

from hypothesis import given, settings, strategies as st

from qsim.cli import main
from qsim.npu.config import PRESETS, parse_config, toml_string

NASTY = 'a "quoted" name\\ with\nnewlines\r\t, \x00 \x7f \x1b[31m, ü, 名前, \U0001F600, \'\'\' """'


@settings(derandomize=True, deadline=None, max_examples=300)
@given(st.text())
def test_any_name_round_trips_through_tomllib(name):
    assert tomllib.loads(f"name = {toml_string(name)}\n") == {"name": name}
    config = dataclasses.replace(PRESETS["8x8"], name=name)
    assert parse_config(config.to_toml()) == config


def test_escapes_are_the_toml_ones():
    assert toml_string('a"b\\c\nd\x00') == '"a\\"b\\\\c\\u000Ad\\u0000"'
    assert toml_string("ü名") == '"ü名"'                    # UTF-8 text stays readable


def test_export_rtl_writes_an_npu_toml_that_reads_back(tmp_path, capsys):
    config = dataclasses.replace(PRESETS["8x8"], name=NASTY)
    source = tmp_path / "in.toml"
    source.write_text(config.to_toml(), encoding="utf-8")
    assert main(["export-rtl", "--config", str(source), "--out", str(tmp_path / "rtl")]) == 0
    written = (tmp_path / "rtl" / "npu.toml").read_bytes().decode("utf-8")
    assert parse_config(written) == config and tomllib.loads(written)["npu"]["name"] == NASTY
