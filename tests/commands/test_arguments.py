"""commands.arguments: the whole-number type and the files `--input` options name."""
import argparse

import pytest

from qsim.commands.arguments import input_files, whole_number


def test_whole_number_accepts_the_minimum_and_refuses_below_and_non_numbers():
    parse = whole_number(1)
    assert parse("1") == 1 and parse("0042") == 42
    with pytest.raises(argparse.ArgumentTypeError, match="0 is less than 1"):
        parse("0")
    for text in ("1.5", "x", "", "0x10"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a whole number"):
            parse(text)
    assert parse.__name__ == "whole number >= 1"     # argparse names the type in its messages


def test_input_files_names_both_readings_of_name_equals_path():
    # "a=b.npy" is a file named so, or input a from b.npy: outputs must replace neither
    assert input_files(["x.npy", "a=b.npy"]) == [("--input", "x.npy"), ("--input", "a=b.npy"),
                                                 ("--input", "b.npy")]
    assert input_files(None) == []
