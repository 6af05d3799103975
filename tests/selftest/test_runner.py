"""`qsim selftest`: the seed is checked before any check runs (numpy takes only seeds >= 0)."""
import pytest

from qsim.cli import main
from qsim.errors import UsageError
from qsim.selftest.runner import check_seed, run_selftest


def test_negative_seed_is_a_usage_error_on_the_command_line(capsys):
    # the CLI rejects it while parsing (argparse: exit 2); run_selftest checks it again below
    with pytest.raises(SystemExit) as info:
        main(["selftest", "--seed", "-1"])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert "--seed" in captured.err and "-1" in captured.err
    assert "Traceback" not in captured.err
    assert "qsim selftest" not in captured.out          # nothing ran


@pytest.mark.parametrize("seed,words", [(-5, "is negative"), (1.5, "is not an integer"),
                                        (True, "is not an integer"), ("3", "is not an integer")])
def test_bad_seeds_in_the_api(seed, words):
    with pytest.raises(UsageError, match=words):
        run_selftest(seed=seed)


def test_large_seed_is_accepted():
    assert check_seed(2**70) == 2**70
    assert check_seed(0) == 0
