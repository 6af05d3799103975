"""The on-disk parse cache runs no code planted by others: it is used only while the folder and
the entry are this user's and writable by no one else (qsim.skriptnd.modules)."""
import os
import pickle
import stat

import pytest

from qsim import cachedir
from qsim.skriptnd import ast, modules

TEXT = "operator twice {\n  @input { x: real; }\n  @output { y: real; }\n  @compose { y = 2.0 * x; }\n}\n"
OTHER_UID = 54321


class Planted:
    """A pickle that, when loaded, creates a marker file: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("QSIM_CACHE_DIR", str(root))
    monkeypatch.setattr(modules, "_MEMORY", {})
    monkeypatch.setattr(cachedir, "_WARNED", set())
    return root / "skriptnd"            # the parse cache's folder under the cache root


def _entry(folder, filename="m.sknd"):
    return folder / (modules.cache_key(TEXT, filename) + ".pickle")


def _plant(folder, marker, mode=0o600):
    folder.mkdir(mode=0o700, exist_ok=True)
    entry = _entry(folder)
    entry.write_bytes(pickle.dumps(Planted(marker)))
    os.chmod(entry, mode)
    return entry


def test_cache_folder_is_created_private_and_serves_a_second_parse(cache, monkeypatch):
    first = modules.parse_cached(TEXT, "m.sknd")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE(_entry(cache).stat().st_mode) == 0o600
    monkeypatch.setattr(modules, "_MEMORY", {})
    monkeypatch.setattr(modules, "parse", lambda *a: pytest.fail("parsed again"))
    again = modules.parse_cached(TEXT, "m.sknd")
    assert isinstance(again, ast.Module) and again == first


def test_private_cache_entry_is_trusted(cache, tmp_path):
    """The control case: in a private folder a planted entry *is* loaded (so the refusals
    below are what stops it, not the test's pickle)."""
    marker = tmp_path / "ran"
    _plant(cache, marker)
    modules.parse_cached(TEXT, "m.sknd")
    assert marker.exists()


@pytest.mark.parametrize("spoil,why", [
    (lambda folder, entry: os.chmod(folder, 0o777), "writable by group or others (mode 0777)"),
    (lambda folder, entry: os.chmod(folder, 0o770), "writable by group or others (mode 0770)"),
    (lambda folder, entry: os.chown(folder, OTHER_UID, -1), f"owned by uid {OTHER_UID}"),
    (lambda folder, entry: os.chown(entry, OTHER_UID, -1), f"owned by uid {OTHER_UID}"),
    (lambda folder, entry: os.chmod(entry, 0o666), "writable by group or others (mode 0666)"),
])
def test_cache_writable_by_others_is_skipped_with_a_warning(cache, tmp_path, capsys, spoil, why):
    marker = tmp_path / "ran"
    entry = _plant(cache, marker)
    spoil(cache, entry)
    module = modules.parse_cached(TEXT, "m.sknd")
    assert not marker.exists()                           # the planted pickle never ran
    assert isinstance(module, ast.Module) and module.get("twice") is not None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: not using the parse cache" in err and why in err
    modules._MEMORY.clear()
    modules.parse_cached(TEXT, "m.sknd")                  # warned once per place
    assert capsys.readouterr().err == ""
    assert not marker.exists()


def test_entries_that_are_symbolic_links_are_not_followed(cache, tmp_path):
    marker = tmp_path / "ran"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    target = _plant(elsewhere, marker)
    cache.mkdir(mode=0o700)
    _entry(cache).symlink_to(target)
    modules.parse_cached(TEXT, "m.sknd")
    assert not marker.exists()


def test_an_interrupted_entry_write_leaves_neither_entry_nor_temporary_file(cache, monkeypatch):
    """The entry is written through qsim.atomic: a failure while pickling leaves the folder as it
    was (no half-written entry that a later run would load, no stray temporary file)."""
    def broken_dump(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(modules.pickle, "dump", broken_dump)
    module = modules.parse_cached(TEXT, "m.sknd")          # the cache is best effort: parsing works
    assert isinstance(module, ast.Module)
    assert sorted(p.name for p in cache.iterdir()) == []


def test_the_cache_key_covers_every_source_of_the_parser():
    """A cached AST is keyed by the files that decide what a text parses to: the parser and every
    module of the package it imports, transitively (a rule class left out would serve stale ASTs
    after an edit)."""
    import ast as py_ast
    from pathlib import Path
    folder = Path(modules.__file__).parent
    seen, todo = set(), ["parser.py"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in py_ast.walk(py_ast.parse((folder / name).read_text())):
            if isinstance(node, py_ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                todo += [t + ".py" for t in targets if (folder / (t + ".py")).is_file()]
    assert seen == {"parser.py", "ast.py", "syntax_definitions.py", "syntax_expressions.py"}
    assert seen | {"skriptnd.lark"} == set(modules.FRONTEND_SOURCES)
