"""Caches whose content qsim loads as code (parse pickles, Verilator libraries) are used only
while private to the user (qsim.cachedir); the Verilator cache falls back to a private temporary
folder, and a cached library that others could have written is refused."""
import os
import stat
from pathlib import Path

import pytest

from qsim import cachedir
from qsim.errors import UnsupportedError
from qsim.npu import sim_verilator

OTHER_UID = 54321


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.setattr(cachedir, "_WARNED", set())
    monkeypatch.setattr(cachedir, "_FALLBACKS", {})
    return tmp_path / "root"


def test_cache_folders_live_under_one_root_created_private(root):
    folder = cachedir.private_folder("verilator", "Verilator build cache")
    assert folder == root / "verilator" == sim_verilator.cache_root()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.parametrize("spoil", ["group-writable", "world-writable", "foreign-owner", "link"])
def test_a_folder_others_can_write_is_replaced_by_a_private_temporary_one(root, tmp_path, capsys, spoil):
    shared = root / "verilator"
    if spoil == "link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        root.mkdir()
        shared.symlink_to(elsewhere)
    else:
        shared.mkdir(parents=True, mode=0o700)
        if spoil == "foreign-owner":
            os.chown(shared, OTHER_UID, OTHER_UID)
        else:
            os.chmod(shared, 0o770 if spoil == "group-writable" else 0o777)
    folder = cachedir.private_folder("verilator", "Verilator build cache")
    assert folder != shared and folder.is_dir()
    assert cachedir.not_private(os.lstat(folder), want_dir=True) is None
    assert "not using the Verilator build cache" in capsys.readouterr().err
    # the same fallback for the rest of the process, and the warning only once
    assert cachedir.private_folder("verilator", "Verilator build cache") == folder
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("spoil", ["file-writable", "file-foreign", "entry-writable"])
def test_a_cached_library_others_could_have_written_is_refused(tmp_path, spoil):
    entry = tmp_path / "entry"
    entry.mkdir(mode=0o700)
    lib = entry / "libqsim_npu.so"
    lib.write_bytes(b"\x7fELF planted")
    os.chmod(lib, 0o600)
    assert sim_verilator.cached_build_is_usable(lib)          # the control case
    if spoil == "file-writable":
        os.chmod(lib, 0o622)
    elif spoil == "file-foreign":
        os.chown(lib, OTHER_UID, OTHER_UID)
    else:
        os.chmod(entry, 0o777)
    with pytest.raises(UnsupportedError, match="may be written by other users"):
        sim_verilator.cached_build_is_usable(lib)


def test_a_missing_library_is_simply_built(tmp_path):
    assert not sim_verilator.cached_build_is_usable(Path(tmp_path / "none" / "lib.so"))


class _Planted:
    """Unpickling this creates the file `marker`: the proof that a cache entry was loaded."""
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("linked", [False, True])
def test_a_parse_cache_folder_that_is_a_link_is_never_read(root, tmp_path, capsys, linked):
    """$QSIM_CACHE_DIR/skriptnd as a link to a private folder holding pickles: none is loaded
    (the control case, a real folder, shows that the planted entry would be)."""
    import pickle
    from qsim.skriptnd import modules
    text, filename = "graph G { @input { x: real[1]; } @output { y: real[1]; } " \
                     "@compose { y = x; } }", "planted.sknd"
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    marker = tmp_path / "loaded"
    entry = planted / (modules.cache_key(text, filename) + ".pickle")
    entry.write_bytes(pickle.dumps(_Planted(str(marker))))
    os.chmod(entry, 0o600)
    root.mkdir()
    if linked:
        (root / "skriptnd").symlink_to(planted, target_is_directory=True)
    else:
        os.rename(planted, root / "skriptnd")
    saved = modules._MEMORY.copy()
    modules._MEMORY.clear()             # (the in-memory cache would answer first)
    try:
        module = modules.parse_cached(text, filename)
    finally:
        modules._MEMORY.clear()
        modules._MEMORY.update(saved)
    assert marker.exists() == (not linked)
    if linked:
        assert module.graphs and module.graphs[0].name == "G"          # parsed from the text
        err = capsys.readouterr().err
        assert f"not using the parse cache {root / 'skriptnd'}: a symbolic link" in err
        assert (root / "skriptnd").is_symlink()                        # left as it was
        assert sorted(p.name for p in planted.iterdir()) == [entry.name]   # nothing written there


def test_a_verilator_cache_that_is_a_link_is_named_as_one(root, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    root.mkdir()
    (root / "verilator").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    folder = cachedir.private_folder("verilator", "Verilator build cache")
    assert folder != root / "verilator" and not str(folder).startswith(str(tmp_path / "elsewhere"))
    err = capsys.readouterr().err
    assert f"not using the Verilator build cache {root / 'verilator'}: a symbolic link;" in err
