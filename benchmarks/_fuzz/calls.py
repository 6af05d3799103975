"""Library entry points a case can call instead of the CLI (faster, and a contract of their own:
a QsimError is a good outcome, any other exception is a traceback).

Each takes the case's argument (a path relative to the case folder) and returns an exit code
the way the CLI would: 0 on success, 2 on a QsimError (message printed as the CLI prints it).
"""
from __future__ import annotations

import sys

from qsim.errors import QsimError


def _as_cli(fn):
    def call(arg: str) -> int:
        try:
            fn(arg)
        except QsimError as err:
            print(f"qsim: {err.format()}", file=sys.stderr)
            return 2
        return 0
    call.__name__ = fn.__name__
    return call


def _read_tensor(path: str) -> None:
    from qsim.tensorfile import read_tensor_file
    read_tensor_file(path).values()


def _load_config(path: str) -> None:
    from qsim.npu.config import load_config
    load_config(path)


def _load_area_table(path: str) -> None:
    from qsim.npu.area import load_area_table
    load_area_table(path)


def _load_space(path: str) -> None:
    from qsim.explore.space import load_space
    from qsim.npu.config import load_config
    load_space(path, None, load_config("16x16"))


# The same calls as Python one-liners, for reproducers ({arg} is the case's argument).
SNIPPETS = {
    "read_tensor": "from qsim.tensorfile import read_tensor_file; read_tensor_file({arg!r}).values()",
    "load_config": "from qsim.npu.config import load_config; load_config({arg!r})",
    "load_area_table": "from qsim.npu.area import load_area_table; load_area_table({arg!r})",
    "load_space": ("from qsim.explore.space import load_space; from qsim.npu.config import load_config; "
                   "load_space({arg!r}, None, load_config('16x16'))"),
}

CALLS = {"read_tensor": _as_cli(_read_tensor), "load_config": _as_cli(_load_config),
         "load_area_table": _as_cli(_load_area_table), "load_space": _as_cli(_load_space)}
