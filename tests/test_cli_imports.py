"""`qsim` starts without its heavy optional libraries: they are imported by the command that uses
them, never by building the parser (docs/architecture.md: deferred imports)."""
import subprocess
import sys

HEAVY = ("amaranth", "matplotlib", "dask", "distributed", "onnx", "cocotb")


def test_the_command_line_imports_no_heavy_library():
    code = ("import sys, qsim.cli; qsim.cli.build_parser(); "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == ""
