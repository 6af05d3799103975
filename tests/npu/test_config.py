"""NPU configuration: presets, a full TOML round trip, and every validation error path."""
import pytest

from qsim.errors import DataError, UsageError
from qsim.hw.params import Dataflow
from qsim.npu.config import PRESETS, load_config, parse_config

GOOD = """[npu]
name = "tiny"
rows = 4
cols = 8
dataflow = "os"
input_buffer_bytes = 256
weight_buffer_bytes = 512
accumulator_buffer_bytes = 1024
dram_bytes_per_cycle = 16
clock_mhz = 250
"""


def test_presets_exist_and_are_valid():
    assert {"8x8", "16x16", "32x32"} <= set(PRESETS)
    for name, preset in PRESETS.items():
        assert parse_config(preset.to_toml()) == preset
    assert load_config("16x16").dataflow is Dataflow.WEIGHT_STATIONARY
    assert load_config("16x16:os").dataflow is Dataflow.OUTPUT_STATIONARY


def test_good_file_round_trips(tmp_path):
    path = tmp_path / "npu.toml"
    path.write_text(GOOD)
    config = load_config(path)
    assert (config.rows, config.cols, config.dataflow) == (4, 8, Dataflow.OUTPUT_STATIONARY)
    assert config.geometry.acc_depth_words == 1024 // 32
    assert config.clock_mhz == 250.0
    assert parse_config(config.to_toml()) == config


@pytest.mark.parametrize("edit,words", [
    (("rows = 4", "rows = 0"), ["'rows' = 0", "[1, 64]", ":3"]),
    (("cols = 8", "cols = 65"), ["'cols' = 65", "[1, 64]", ":4"]),
    (("rows = 4", "rows = 4.5"), ["'rows'", "integer"]),
    (("rows = 4", "rows = true"), ["'rows'", "integer"]),
    (('dataflow = "os"', 'dataflow = "diagonal"'), ["dataflow", "'diagonal'", "'ws'"]),
    (("input_buffer_bytes = 256", "input_buffer_bytes = 258"), ["multiple", "4 bytes", ":6"]),
    (("weight_buffer_bytes = 512", "weight_buffer_bytes = 32"), ["4 words", "at least 8"]),
    (("accumulator_buffer_bytes = 1024", "accumulator_buffer_bytes = 128"), ["at least 8"]),
    (("dram_bytes_per_cycle = 16", "dram_bytes_per_cycle = 0"), ["dram_bytes_per_cycle", "[1, 4096]"]),
    (("clock_mhz = 250", "clock_mhz = -1"), ["clock_mhz", "(0, 10000]"]),
    (("clock_mhz = 250", "clock = 250"), ["unknown key 'clock'"]),
    (("rows = 4\n", ""), ["missing key 'rows'"]),
    (("[npu]", "[accelerator]"), ["[npu]"]),
    (("rows = 4", "rows = = 4"), ["TOML"]),
])
def test_bad_values_name_file_line_key_and_range(edit, words):
    text = GOOD.replace(*edit)
    with pytest.raises(DataError) as err:
        parse_config(text, file="cfg.toml")
    message = str(err.value)
    assert message.startswith("cfg.toml")
    for word in words:
        assert word in message, (word, message)


def test_unknown_preset_or_missing_file():
    with pytest.raises(UsageError, match="not a preset and not a file"):
        load_config("12x12")
    with pytest.raises(UsageError, match="unknown dataflow"):
        load_config("8x8:xs")


def test_overlong_config_path_is_a_data_error():
    with pytest.raises(DataError, match="File name too long") as err:
        load_config("a" * 5000)
    assert "NPU configuration" in str(err.value) and err.value.hint
