"""Files a model names stay inside the model (issue 11 part 6), and containers are unpacked
member by member within the limits (container.py): escapes, links, devices and huge members
are refused with a located DataError before anything is read or unpacked."""
import io
import os
import tarfile

import numpy as np
import pytest

from qsim.errors import DataError
from qsim.loader import load
from qsim.nnef1 import load_nnef1
from qsim.tensorfile import tensor_bytes, write_tensor

GRAPH = """version 1.0;

graph net( input ) -> ( output )
{{
    input = external(shape = [1, 3]);
    bias = variable(shape = [1, 3], label = '{label}');
    output = add(input, bias);
}}
"""
BIAS = np.float32([[1.0, 2.0, 3.0]])


def make_folder(folder, label="layer/bias"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.nnef").write_text(GRAPH.format(label=label))
    return folder


@pytest.mark.parametrize("label", ["../elsewhere/bias", "layer/../../elsewhere/bias", "/tmp/elsewhere/bias",
                                   "..\\\\elsewhere\\\\bias"])
def test_variable_label_that_leaves_the_folder_is_refused(tmp_path, label):
    write_tensor(tmp_path / "elsewhere" / "bias.dat", BIAS)   # the file exists: it must not be read
    model = make_folder(tmp_path / "model", label)
    with pytest.raises(DataError) as err:
        load_nnef1(str(model))
    stored = label.replace("\\\\", "\\")   # the NNEF string literal unescaped
    assert err.value.message == (f"variable '{stored}' names '{stored}.dat', which is not a path inside the "
                                 "model folder")
    loc = err.value.location
    assert (loc.file, loc.line, loc.column) == (str(model / "graph.nnef"), 6, 12)


def test_symbolic_link_out_of_the_folder_is_refused(tmp_path):
    write_tensor(tmp_path / "secret" / "bias.dat", BIAS)
    model = make_folder(tmp_path / "model")
    (model / "layer").mkdir()
    os.symlink(tmp_path / "secret" / "bias.dat", model / "layer" / "bias.dat")
    with pytest.raises(DataError) as err:
        load_nnef1(str(model))
    assert err.value.message.startswith(f"variable 'layer/bias' names {model / 'layer' / 'bias.dat'}, which "
                                        f"resolves to {tmp_path / 'secret' / 'bias.dat'}, outside the model folder")
    assert err.value.location.line == 6
    # a folder link that escapes is refused the same way
    os.unlink(model / "layer" / "bias.dat")
    os.rmdir(model / "layer")
    os.symlink(tmp_path / "secret", model / "layer")
    with pytest.raises(DataError, match="outside the model folder"):
        load_nnef1(str(model))


def test_links_inside_the_folder_and_a_linked_model_folder_load(tmp_path):
    model = make_folder(tmp_path / "model")
    write_tensor(model / "shared" / "bias.dat", BIAS)
    os.symlink(model / "shared", model / "layer")
    os.symlink(model, tmp_path / "alias")
    for path in (model, tmp_path / "alias"):
        g = load_nnef1(str(path))
        np.testing.assert_array_equal(g.tensor("bias").data, BIAS)


def make_container(path, members, mode="w:gz"):
    """members: (name, bytes) for regular files, or a prepared TarInfo (bytes None)."""
    with tarfile.open(path, mode) as tar:
        for name, data in members:
            if isinstance(name, tarfile.TarInfo):
                tar.addfile(name)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def good_members():
    return [("graph.nnef", GRAPH.format(label="layer/bias").encode()), ("layer/bias.dat", tensor_bytes(BIAS))]


def link(name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize("extra, message", [
    (("../escape.dat", b"x"), "container member '../escape.dat' has a name outside the container"),
    (("/etc/escape.dat", b"x"), "container member '/etc/escape.dat' has a name outside the container"),
    (("a/../../escape.dat", b"x"), "has a name outside the container"),
    ((link("layer/other.dat", "/etc/passwd"), None),
     "container member 'layer/other.dat' is a symbolic link to '/etc/passwd'"),
    ((link("layer/hard.dat", "graph.nnef", tarfile.LNKTYPE), None), "is a hard link to 'graph.nnef'"),
    ((link("dev", "", tarfile.CHRTYPE), None), "container member 'dev' is a device"),
    ((link("fifo", "", tarfile.FIFOTYPE), None), "container member 'fifo' is a fifo"),
])
def test_container_members_that_could_escape_are_refused(tmp_path, extra, message):
    archive = make_container(tmp_path / "m.tgz", good_members() + [extra])
    with pytest.raises(DataError) as err:
        load_nnef1(str(archive))
    assert message in err.value.message
    assert err.value.location.file == str(archive)
    assert not (tmp_path / "escape.dat").exists()


def test_member_size_is_checked_before_unpacking(tmp_path, monkeypatch):
    """A member declaring 6 GiB is refused from its header: nothing is decompressed or written."""
    archive = tmp_path / "bomb.tar"
    with open(archive, "wb") as f:
        info = tarfile.TarInfo("layer/bias.dat")
        info.size = 6 << 30
        f.write(info.tobuf(format=tarfile.GNU_FORMAT))   # the header only: the data never exist
    with pytest.raises(DataError) as err:
        load_nnef1(str(archive))
    assert "container member 'layer/bias.dat' is 6 GiB, over the 4 GiB limit on one tensor" in err.value.message
    assert "--max-tensor-bytes" in err.value.hint
    # vendor files are held to the same limit, and the limit follows QSIM_MAX_TENSOR_BYTES
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1K")
    archive = make_container(tmp_path / "vendor.tgz", good_members() + [("vendor/blob.bin", bytes(2048))])
    with pytest.raises(DataError, match="member 'vendor/blob.bin' is 2 KiB, over the 1 KiB limit"):
        load_nnef1(str(archive))


def test_total_unpacked_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("QSIM_MAX_TENSOR_BYTES", "1K")
    members = good_members() + [(f"vendor/part{i}.bin", bytes(1000)) for i in range(5)]
    archive = make_container(tmp_path / "many.tgz", members)
    with pytest.raises(DataError, match=r"unpacks to more than 4 KiB \(4 x the tensor limit\) at member "
                                        r"'vendor/part3.bin'"):
        load_nnef1(str(archive))


def test_truncated_and_corrupt_containers(tmp_path):
    archive = make_container(tmp_path / "m.tgz", good_members())
    blob = archive.read_bytes()
    (tmp_path / "cut.tgz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataError, match="cannot read container .*cut.tgz"):
        load_nnef1(str(tmp_path / "cut.tgz"))
    # a member whose data end early (plain tar, header intact)
    tar = make_container(tmp_path / "m.tar", good_members(), mode="w")
    data = tar.read_bytes()
    (tmp_path / "short.tar").write_bytes(data[:1024 + 512 + 100])
    with pytest.raises(DataError, match="cannot read container .*short.tar"):
        load_nnef1(str(tmp_path / "short.tar"))


def test_container_tensor_files_get_the_header_checks(tmp_path):
    bad = bytearray(tensor_bytes(BIAS))
    bad[4:8] = (0).to_bytes(4, "little")
    bad[12:28] = (65536).to_bytes(4, "little") * 4     # extents whose int64 product wraps to 0
    bad[8:12] = (4).to_bytes(4, "little")
    archive = make_container(tmp_path / "m.tgz", [good_members()[0], ("layer/bias.dat", bytes(bad[:128]))])
    with pytest.raises(DataError) as err:
        load_nnef1(str(archive))
    assert err.value.location.file == f"{archive}!layer/bias.dat"
    assert "more than the 4-byte data length field can hold" in err.value.message


def test_container_is_unpacked_to_a_temporary_folder_that_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    top = tarfile.TarInfo("./")     # as `tar czf m.tgz -C model .` writes it
    top.type = tarfile.DIRTYPE
    members = [(top, None)] + [("./" + name, data) for name, data in good_members()] + [("vendor/x.bin", b"v")]
    archive = make_container(tmp_path / "m.tgz", members)
    g = load(str(archive))
    np.testing.assert_array_equal(g.tensor("bias").data, BIAS)
    assert os.listdir(tmp_path / "tmp") == []
    with pytest.raises(DataError):
        load(str(make_container(tmp_path / "bad.tgz", good_members() + [("../x", b"")])))
    assert os.listdir(tmp_path / "tmp") == []
