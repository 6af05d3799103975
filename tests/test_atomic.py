import os
import stat

import pytest

from qsim.atomic import atomic_directory, atomic_write_bytes, atomic_write_text
from qsim.errors import UsageError


def test_atomic_directory_appears_whole(tmp_path):
    target = tmp_path / "out"
    with atomic_directory(target) as d:
        (d / "a.txt").write_text("x")
        assert not target.exists()          # nothing visible until complete
    assert (target / "a.txt").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_directory_failure_leaves_old_result(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as d:
            (d / "new.txt").write_text("half")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_directory_replaces_and_refuses(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic_directory(target) as d:
        (d / "new.txt").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    with pytest.raises(UsageError, match="already exists"):
        with atomic_directory(target, overwrite=False):
            pass
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        with atomic_directory(f):
            pass


def test_atomic_write_text(tmp_path):
    p = tmp_path / "sub" / "r.json"
    atomic_write_text(p, "{}")
    assert p.read_text() == "{}"
    assert [q.name for q in p.parent.iterdir()] == ["r.json"]


def test_atomic_write_bytes_replaces_whole_or_leaves_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "sub" / "w.dat"
    atomic_write_bytes(p, b"\x00old")
    assert p.read_bytes() == b"\x00old"
    written = []

    def replace_fails(src, dst):
        written.append(open(src, "rb").read())      # the temporary file held the whole content
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", replace_fails)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(p, b"new content")
    assert written == [b"new content"]
    assert p.read_bytes() == b"\x00old"                # the old file is untouched
    assert [q.name for q in p.parent.iterdir()] == ["w.dat"]   # and no temporary is left


def test_a_tensor_file_is_written_through_atomic_write_bytes(tmp_path, monkeypatch):
    import numpy as np

    from qsim import tensorfile
    calls = []
    monkeypatch.setattr(tensorfile, "atomic_write_bytes", lambda path, data: calls.append((path, data)))
    tensorfile.write_tensor(tmp_path / "t.dat", np.arange(3, dtype=np.int8))
    assert [path for path, _ in calls] == [tmp_path / "t.dat"]
    assert calls[0][1] == tensorfile.tensor_bytes(np.arange(3, dtype=np.int8))
    assert not (tmp_path / "t.dat").exists()


# ---- crash safety: SIGKILL in every window of the swap --------------------------------------

import signal
import subprocess
import sys

from qsim import atomic

WRITER = """
import sys
from qsim.atomic import atomic_directory
with atomic_directory(sys.argv[1]) as d:
    for i in range(4):
        (d / f"part{i}.txt").write_text(sys.argv[2])
"""


def _write(target, tag, crash=None, exchange=True):
    env = dict(os.environ)
    env.pop(atomic.CRASH_ENV, None)
    env.pop(atomic.NO_EXCHANGE_ENV, None)
    if crash:
        env[atomic.CRASH_ENV] = crash
    if not exchange:
        env[atomic.NO_EXCHANGE_ENV] = "1"
    return subprocess.run([sys.executable, "-c", WRITER, str(target), tag], env=env,
                          capture_output=True, text=True, timeout=60)


def _content(target):
    """'old'/'new'/... when `target` holds one complete write, else a description."""
    if not target.is_dir():
        return "missing"
    files = sorted(p.name for p in target.iterdir())
    texts = {p.read_text() for p in target.iterdir()}
    if files == [f"part{i}.txt" for i in range(4)] and len(texts) == 1:
        return texts.pop()
    return f"mixed {files} {texts}"


# where each crash leaves OUT (None: it may be missing until the next run recovers it)
EXCHANGE_AFTER_CRASH = {"partial-created": "old", "built": "old", "swapped": "new",
                        "discarding": "new"}
JOURNAL_AFTER_CRASH = {"partial-created": "old", "built": "old", "journal-written": "old",
                       "old-moved": None, "swapped": "new", "discarding": "new"}


@pytest.mark.parametrize("exchange,point", [(True, p) for p in EXCHANGE_AFTER_CRASH]
                         + [(False, p) for p in JOURNAL_AFTER_CRASH])
def test_killed_swap_leaves_old_or_new_and_next_run_cleans_up(tmp_path, exchange, point):
    target = tmp_path / "out"
    assert _write(target, "old").returncode == 0
    proc = _write(target, "new", crash=point, exchange=exchange)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    expected = (EXCHANGE_AFTER_CRASH if exchange else JOURNAL_AFTER_CRASH)[point]
    if expected is None:
        assert _content(target) == "missing"        # the one window of the journal protocol
        atomic.recover(target)
        assert _content(target) == "new"            # the journal names the complete new one
    else:
        assert _content(target) == expected
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "out"]
    if expected is None:
        assert leftovers == []                      # recover() completed the swap
    else:                                           # every other window leaves a named leftover
        assert leftovers and all(atomic._leftover_re("out").fullmatch(n) for n in leftovers)
    # the next run completes or removes whatever the killed one left
    proc = _write(target, "newer", exchange=exchange)
    assert proc.returncode == 0, proc.stderr
    assert _content(target) == "newer"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_recover_restores_old_when_the_new_folder_is_gone(tmp_path):
    """A journal whose new folder vanished: the old one is put back (never nothing)."""
    target = tmp_path / "out"
    old = tmp_path / ".out.old-999999999-x"
    old.mkdir()
    (old / "a").write_text("old")
    (tmp_path / ".out.swap-999999999").write_text('{"new": ".out.partial-999999999-y", '
                                                  '"old": ".out.old-999999999-x"}')
    atomic.recover(target)
    assert (target / "a").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_leftovers_of_live_processes_are_kept(tmp_path):
    """A partial folder of a running process (here: this one) is not touched."""
    mine = tmp_path / f".out.partial-{os.getpid()}-abc"
    mine.mkdir()
    atomic.recover(tmp_path / "out")
    assert mine.is_dir()


def test_renameat2_exchange_swaps_two_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    assert atomic.renameat2(a, b, atomic._RENAME_EXCHANGE)   # ext4/tmpfs on Linux >= 3.15
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"
    with pytest.raises(FileExistsError):
        atomic.renameat2(a, b, atomic._RENAME_NOREPLACE)


def test_atomic_file_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "y.npy"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic.atomic_file(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    with atomic.atomic_file(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["y.npy"]
    with pytest.raises(UsageError, match="is a folder"):
        with atomic.atomic_file(tmp_path):
            pass


def test_unwritable_output_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot write the output"):
        with atomic_directory(blocker / "sub"):
            pass
    with pytest.raises(UsageError, match="cannot write the output"):
        with atomic_directory("/proc/qsim-test-out"):
            pass


@pytest.mark.parametrize("journal", ['{"new": "../elsewhere", "old": ".out.old-999999999-x"}',
                                     '[' * 100000, '\xff', '{"new": 1, "old": 2}'])
def test_damaged_or_hostile_journal_moves_nothing(tmp_path, journal):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    parent = tmp_path / "p"
    parent.mkdir()
    (parent / ".out.swap-999999999").write_text(journal)
    atomic.recover(parent / "out")
    assert elsewhere.is_dir() and not (parent / "out").exists()
    assert list(parent.iterdir()) == []                 # the journal itself is removed


@pytest.mark.parametrize("exchange", [True, False])
def test_an_output_that_is_a_link_stays_a_link_to_the_new_output(tmp_path, monkeypatch, exchange):
    """The result lands in the folder the link points to, swapped in beside that folder; the
    link itself, and the folder that holds it, are left as they are."""
    if not exchange:
        monkeypatch.setenv(atomic.NO_EXCHANGE_ENV, "1")
    (tmp_path / "disk").mkdir()
    earlier = tmp_path / "disk" / "earlier"
    earlier.mkdir()
    (earlier / "old.txt").write_text("old")
    (tmp_path / "here").mkdir()
    link = tmp_path / "here" / "out"
    link.symlink_to(earlier, target_is_directory=True)
    with atomic_directory(link) as d:
        assert d.parent == tmp_path / "disk"                # staged beside the target
        (d / "new.txt").write_text("new")
    assert link.is_symlink() and os.readlink(link) == str(earlier)
    assert sorted(p.name for p in earlier.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["earlier"]
    assert sorted(p.name for p in (tmp_path / "here").iterdir()) == ["out"]


@pytest.fixture(params=[0o022, 0o077, 0o002, 0o027])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def test_outputs_get_the_permissions_cp_and_numpy_save_give_under_the_umask(tmp_path, umask):
    import numpy as np
    from qsim.atomic import atomic_file, atomic_write_bytes
    with atomic_directory(tmp_path / "out", command="test") as d:
        np.save(d / "a.npy", np.zeros(2))
        atomic_write_bytes(d / "b.dat", b"data")
        (d / "sub").mkdir()
    with atomic_file(tmp_path / "y.npy") as tmp:
        tmp.write_bytes(b"y")
    want_dir, want_file = 0o777 & ~umask, 0o666 & ~umask
    mode = lambda p: stat.S_IMODE(os.lstat(p).st_mode)      # noqa: E731
    assert {mode(tmp_path / "out"), mode(tmp_path / "out" / "sub")} == {want_dir}
    assert {mode(tmp_path / "out" / n) for n in ("a.npy", "b.dat", atomic.MANIFEST)} == {want_file}
    assert mode(tmp_path / "y.npy") == want_file
    np.save(tmp_path / "reference.npy", np.zeros(2))         # what numpy.save itself gives
    assert mode(tmp_path / "reference.npy") == want_file


def test_private_writes_stay_private_whatever_the_umask(tmp_path, umask):
    from qsim.atomic import atomic_directory_once, atomic_file, atomic_write_text
    with atomic_directory_once(tmp_path / "entry") as d:
        (d / "lib.so").write_text("x")
    with atomic_file(tmp_path / "e.pickle", private=True) as tmp:
        tmp.write_bytes(b"p")
    atomic_write_text(tmp_path / "v.v", "module", private=True)
    mode = lambda p: stat.S_IMODE(os.lstat(p).st_mode)      # noqa: E731
    assert mode(tmp_path / "entry") == 0o700
    assert mode(tmp_path / "e.pickle") == mode(tmp_path / "v.v") == 0o600


def test_a_private_write_replaces_a_link_instead_of_following_it(tmp_path):
    from qsim.atomic import atomic_file
    (tmp_path / "elsewhere").write_text("keep")
    (tmp_path / "entry").symlink_to(tmp_path / "elsewhere")
    with atomic_file(tmp_path / "entry", private=True) as tmp:
        tmp.write_bytes(b"new")
    assert not (tmp_path / "entry").is_symlink() and (tmp_path / "entry").read_bytes() == b"new"
    assert (tmp_path / "elsewhere").read_text() == "keep"
    (tmp_path / "link.npy").symlink_to(tmp_path / "elsewhere")
    with atomic_file(tmp_path / "link.npy") as tmp:       # a user's output: the link stays
        tmp.write_bytes(b"result")
    assert (tmp_path / "link.npy").is_symlink() and (tmp_path / "elsewhere").read_bytes() == b"result"


def test_the_manifest_lists_every_file_written_and_only_those(tmp_path):
    with atomic_directory(tmp_path / "out", command="quantize") as d:
        (d / "a.txt").write_text("a")
        (d / "sub" / "deeper").mkdir(parents=True)
        (d / "sub" / "deeper" / "b.dat").write_text("b")
        (d / "empty").mkdir()
    assert atomic.read_manifest(tmp_path / "out") == ("quantize", frozenset({"a.txt", "sub/deeper/b.dat"}))
    with atomic_directory(tmp_path / "plain") as d:
        (d / "a.txt").write_text("a")
    assert atomic.read_manifest(tmp_path / "plain") is None     # no command, no manifest
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "out", command="quantize") as d:
            (d / "half").write_text("x")
            raise RuntimeError("interrupted")
    assert atomic.read_manifest(tmp_path / "out")[1] == {"a.txt", "sub/deeper/b.dat"}


# -- atomic_directory_once: cache entries, the first complete copy stays ------------------------

def test_directory_once_publishes_a_complete_folder(tmp_path):
    from qsim.atomic import atomic_directory_once
    target = tmp_path / "cache" / "abc123"
    with atomic_directory_once(target) as work:
        (work / "lib.so").write_text("built")
        assert not target.exists()                    # nothing visible before completion
    assert (target / "lib.so").read_text() == "built"
    assert sorted(p.name for p in target.parent.iterdir()) == ["abc123"]


@pytest.mark.parametrize("exchange", [True, False])
def test_directory_once_keeps_the_copy_that_arrived_first(tmp_path, monkeypatch, exchange):
    from qsim.atomic import NO_EXCHANGE_ENV, atomic_directory_once
    if not exchange:                                  # plain rename(2): ENOTEMPTY on the loser
        monkeypatch.setenv(NO_EXCHANGE_ENV, "1")
    target = tmp_path / "abc123"
    with atomic_directory_once(target) as work:
        (work / "lib.so").write_text("second")
        target.mkdir()                                # another process finishes first
        (target / "lib.so").write_text("first")
    assert (target / "lib.so").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["abc123"]


def test_directory_once_failure_leaves_nothing(tmp_path):
    from qsim.atomic import atomic_directory_once
    target = tmp_path / "abc123"
    with pytest.raises(RuntimeError, match="build failed"):
        with atomic_directory_once(target) as work:
            (work / "half").write_text("x")
            raise RuntimeError("build failed")
    assert list(tmp_path.iterdir()) == []
