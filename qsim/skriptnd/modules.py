"""SkriptND modules and imports (NNEF 2.0 draft 2.15): finding, parsing and caching them.

A model folder holds `main.sknd` plus other modules (nested modules in subfolders: `import a.b`
is `a/b.sknd`). Standard modules come from qsim's stdlib (package `qsim.stdlib`, files
`<module>.sknd`); a model's own module of the same name wins. Parsed modules are cached twice:
in memory, and on disk as pickles keyed by the SHA-256 of the text and of the front end's own
sources (`$QSIM_CACHE_DIR/skriptnd`, default ~/.cache/qsim/skriptnd), so a warm start skips parsing. The
disk cache is used only while it is private to the user (see `_private`): a pickle planted by
someone else would run their code.
"""
from __future__ import annotations

import hashlib
import importlib.resources
import os
import pickle

from ..atomic import atomic_file
from ..errors import Location, SemanticError, UsageError
from . import ast
from ..cachedir import cache_root, not_private, warn_once
from ..tensorfile import resolve_tensor_path
from .parser import decode_source, parse

STANDARD_MODULES = ("layout", "math", "linalg", "nn", "image", "quant", "algo")
_MEMORY: dict[str, ast.Module] = {}
_FRONTEND_KEY: list[str] = []

# Every file that decides what a text parses to (tests/skriptnd/test_parse_cache.py checks that
# the parser imports no other module of this package).
FRONTEND_SOURCES = ("skriptnd.lark", "ast.py", "parser.py", "syntax_definitions.py", "syntax_expressions.py")


def _frontend_key() -> str:
    """Hash of the grammar, AST and parser sources (the driver and its rule classes): a cached
    AST is valid only for them."""
    if not _FRONTEND_KEY:
        here = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for name in FRONTEND_SOURCES:
            with open(os.path.join(here, name), "rb") as f:
                h.update(f.read())
        _FRONTEND_KEY.append(h.hexdigest()[:16])
    return _FRONTEND_KEY[0]


def cache_dir() -> str | None:
    """The on-disk parse cache folder, `<cache root>/skriptnd` (created private, 0700), or None
    when it cannot be made. Not resolved: it is opened with O_NOFOLLOW and checked, so that a
    symbolic link in its place is refused, never followed."""
    path = os.path.join(cache_root(), "skriptnd")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path


# The cache holds pickles, and unpickling runs code: an entry must not be writable by anyone
# but this user. So the folder and every entry are checked on each use, through the open file
# descriptors (no race with a rename in between): owned by this user, a real folder / regular
# file (no symbolic link), and no write permission for group or others. Otherwise the cache is
# skipped with a one-line warning (once per folder), and the module is parsed from its text.
def _private(st, want_dir: bool) -> str | None:
    return not_private(st, want_dir)


def _warn_unsafe(path: str, why: str) -> None:
    warn_once(path, "parse cache", why)


def _open_private_dir(directory: str) -> int | None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        _warn_unsafe(directory, "a symbolic link" if os.path.islink(directory)
                     else err.strerror or str(err))
        return None
    why = _private(os.fstat(fd), want_dir=True)
    if why is not None:
        os.close(fd)
        _warn_unsafe(directory, why)
        return None
    return fd


def _read_entry(dir_fd: int, directory: str, name: str) -> ast.Module | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None                     # no entry yet (or a link: never followed)
    with os.fdopen(fd, "rb") as f:
        why = _private(os.fstat(f.fileno()), want_dir=False)
        if why is not None:
            _warn_unsafe(os.path.join(directory, name), why)
            return None
        try:
            module = pickle.load(f)
        except Exception:       # noqa: BLE001 - a damaged cache entry is re-parsed
            return None
    return module if isinstance(module, ast.Module) else None


def _write_entry(directory: str, name: str, module: ast.Module) -> None:
    """Best effort: an entry that cannot be written is parsed again next time. atomic_file never
    leaves a half-written entry, and its temporary file is created 0600 like the entry."""
    try:
        with atomic_file(os.path.join(directory, name), private=True) as tmp, open(tmp, "wb") as f:
            pickle.dump(module, f, protocol=pickle.HIGHEST_PROTOCOL)
    except (OSError, UsageError):
        pass


def cache_key(text: str, filename: str) -> str:
    """The cache key of a module text: its entry on disk is `<key>.pickle`."""
    return hashlib.sha256((_frontend_key() + "\0" + filename + "\0" + text).encode()).hexdigest()


def parse_cached(text: str, filename: str) -> ast.Module:
    """parse() with the in-memory and on-disk caches (keyed by content, file name and front end)."""
    key = cache_key(text, filename)
    module = _MEMORY.get(key)
    if module is not None:
        return module
    directory = cache_dir()
    dir_fd = _open_private_dir(directory) if directory else None
    name = key + ".pickle"
    try:
        if dir_fd is not None:
            module = _read_entry(dir_fd, directory, name)
        if module is None:
            module = parse(text, filename)
            if dir_fd is not None:
                _write_entry(directory, name, module)
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    _MEMORY[key] = module
    return module


STDLIB_PATH_PREFIX = "stdlib/"   # the path stdlib_text gives standard modules (in locations)


def is_standard_location(loc) -> bool:
    """Whether a definition at `loc` comes from one of qsim's standard modules."""
    return str(getattr(loc, "file", "")).startswith(STDLIB_PATH_PREFIX)


def stdlib_text(name: str) -> tuple[str, str] | None:
    """(text, path) of standard module `name`, or None."""
    try:
        root = importlib.resources.files("qsim.stdlib")
        entry = root / f"{name}.sknd"
        if entry.is_file():
            return entry.read_text(encoding="utf-8"), f"{STDLIB_PATH_PREFIX}{name}.sknd"
    except (ModuleNotFoundError, FileNotFoundError, TypeError):
        pass
    # editable installs do not always map package_dir entries: fall back to the source tree
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(here, "stdlib", f"{name}.sknd")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return f.read(), f"{STDLIB_PATH_PREFIX}{name}.sknd"
    return None


class ModuleSet:
    """The modules of one model: the main module, and everything it imports (lazily)."""

    def __init__(self, folder: str | None = None):
        self.folder = folder
        self.modules: dict[str, ast.Module] = {}

    def add(self, name: str, module: ast.Module) -> None:
        self.modules[name] = module

    def load_file(self, path: str, name: str | None = None) -> ast.Module:
        try:
            with open(path, "rb") as f:
                text = decode_source(f.read(), path)
        except OSError as err:
            raise UsageError(f"cannot read {path}: {err.strerror}") from None
        module = parse_cached(text, path)
        self.modules[name or module.name] = module
        return module

    def module(self, name: str, loc: Location | None) -> ast.Module:
        found = self.modules.get(name)
        if found is not None:
            return found
        if self.folder is not None:
            # like tensor files, a module file must resolve inside the model folder (no link out)
            path = resolve_tensor_path(self.folder, name.replace(".", "/") + ".sknd",
                                       f"import '{name}'", loc)
            if os.path.isfile(path):
                module = self.load_file(path, name)
                self._check_imported(module, name)
                return module
        std = stdlib_text(name)
        if std is not None:
            module = parse_cached(std[0], std[1])
            self.modules[name] = module
            self._check_imported(module, name)
            return module
        where = f" in {self.folder}" if self.folder else ""
        raise SemanticError(f"unknown module '{name}': no {name.replace('.', '/')}.sknd{where} and no "
                            "standard module of that name", location=loc,
                            hint="standard modules: " + ", ".join(STANDARD_MODULES))

    @staticmethod
    def _check_imported(module: ast.Module, name: str) -> None:
        if module.graphs:
            g = module.graphs[0]
            raise SemanticError(f"imported module '{name}' defines graph '{g.name}'; only the main "
                                "module may define graphs (2.15)", location=g.loc)

    def resolve(self, qualname: str, current: str, loc: Location) -> tuple[str, ast.OperatorDef]:
        """(module name, definition) of an invoked operator `name` or `module.name`."""
        module_name, _, op_name = qualname.rpartition(".")
        here = self.modules[current]
        if not module_name:
            op = here.get(op_name)
            if op is None:
                imported = [i.module for i in here.imports]
                hint = None
                for m in imported:
                    if self.module(m, None).get(op_name) is not None:
                        hint = f"did you mean '{m}.{op_name}'?"
                        break
                raise SemanticError(f"unknown operator '{op_name}' (not defined in module '{current}')",
                                    location=loc, hint=hint or "qualify operators of imported modules, "
                                    "e.g. nn.conv")
            return current, op
        if module_name != current and module_name not in {i.module for i in here.imports}:
            raise SemanticError(f"module '{module_name}' is not imported by module '{current}'",
                                location=loc, hint=f"add 'import {module_name};' at the top")
        module = self.module(module_name, loc)
        op = module.get(op_name)
        if op is None:
            raise SemanticError(f"module '{module_name}' has no operator '{op_name}'", location=loc)
        if op.is_graph:
            raise SemanticError(f"'{qualname}' is a graph", location=loc)
        return module_name, op
