import subprocess
import sys

import qsim
from qsim.cli import main


def test_version_and_help(capsys):
    try:
        main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert f"qsim {qsim.__version__}" in capsys.readouterr().out
    assert main([]) == 2


def test_selftest_passes(capsys):
    assert main(["selftest", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out and "FAIL" not in out


def test_console_script_reports_usage_error_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "qsim", "no-such-command"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "invalid choice" in proc.stderr
