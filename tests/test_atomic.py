import pytest

from qsim.atomic import atomic_directory, atomic_write_text
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
