"""qsim.hw and qsim.stdlib in a source checkout.

hw/ and stdlib/ sit at the top of the repository, beside qsim/; setup.py maps them into the
installed package as qsim.hw and qsim.stdlib. A checkout used as it is (`python -m qsim` in the
clone, PYTHONPATH=clone, a second work tree of the same repository) has no such mapping, or an
editable install's mapping that points at another tree. When this qsim package is such a
checkout's (its parent holds setup.py and hw/, and qsim/hw does not exist), a finder placed first
on sys.meta_path gives the two names this tree's folders, so the checkout imports its own HDL and
standard modules. An installed wheel has qsim/hw and no setup.py beside it: nothing changes there.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_PACKAGE_DIR)
_SIBLINGS = {"qsim.hw": "hw", "qsim.stdlib": "stdlib"}


class _SiblingFolderFinder(importlib.abc.MetaPathFinder):
    """Finds qsim.hw / qsim.stdlib in the checkout's top-level folders (their submodules are then
    found through the package's __path__ as usual)."""

    def __init__(self, names: frozenset[str]):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        # the standard path search, over the repository's top folder only: hw/ is a regular
        # package, stdlib/ (data files only) a namespace package
        return importlib.machinery.PathFinder.find_spec(fullname, [_ROOT])


def map_sibling_folders() -> None:
    if not os.path.isfile(os.path.join(_ROOT, "setup.py")):
        return
    names = frozenset(name for name, sub in _SIBLINGS.items()
                      if os.path.isdir(os.path.join(_ROOT, sub))
                      and not os.path.exists(os.path.join(_PACKAGE_DIR, sub)))
    if names and not any(isinstance(f, _SiblingFolderFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SiblingFolderFinder(names))
