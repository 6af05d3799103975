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
