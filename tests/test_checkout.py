"""A source checkout imports as it is: qsim.hw and qsim.stdlib come from this tree's hw/ and
stdlib/ even when no install maps them (python -m qsim in a clone after `pip install .`), and even
when an editable install of another tree maps them elsewhere."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# drop every import hook an install may have added (setuptools' editable finders), so only the
# checkout itself can resolve qsim.hw
PROBE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '').lower()]
sys.path_hooks[:] = [h for h in sys.path_hooks if 'editable' not in getattr(h, '__module__', '').lower()]
import importlib.resources, qsim, qsim.hw.params
print(qsim.__file__)
print(qsim.hw.params.__file__)
print(importlib.resources.files('qsim.stdlib').joinpath('nn.sknd').is_file())
"""


def test_the_checkout_resolves_its_own_hw_and_stdlib():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert Path(out[0]).resolve() == ROOT / "qsim" / "__init__.py"
    assert Path(out[1]).resolve() == ROOT / "hw" / "params.py"
    assert out[2] == "True"


def test_python_dash_m_qsim_runs_in_the_clone(tmp_path):
    """a command that compiles for the NPU (qsim.hw.isa) runs from the clone"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = tmp_path / "vectors"
    probe = (PROBE.split("import importlib")[0] + "import runpy\n"
             f"sys.argv = ['qsim', 'export-vectors', '--out', {str(out)!r}]\n"
             "runpy.run_module('qsim', run_name='__main__')\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").is_file()
