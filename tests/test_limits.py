import pytest

from qsim import limits
from qsim.errors import DataError, UsageError


@pytest.mark.parametrize("text,expected", [("1", 1), ("4G", 4 << 30), ("512m", 512 << 20),
                                           ("3KiB", 3 << 10), (" 2T ", 2 << 40)])
def test_parse_byte_size(text, expected):
    assert limits.parse_byte_size(text) == expected


@pytest.mark.parametrize("text", ["", "0", "-1", "4X", "1e9", "G", "9" * 40])
def test_parse_byte_size_refuses(text):
    with pytest.raises(UsageError, match="not a positive size"):
        limits.parse_byte_size(text)


def test_limit_from_environment(monkeypatch):
    monkeypatch.delenv(limits.MAX_TENSOR_BYTES_ENV, raising=False)
    assert limits.max_tensor_bytes() == 4 << 30
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "1M")
    assert limits.max_tensor_bytes() == 1 << 20
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "lots")
    with pytest.raises(UsageError, match="QSIM_MAX_TENSOR_BYTES"):
        limits.max_tensor_bytes()


def test_check_tensor_size(monkeypatch):
    monkeypatch.setenv(limits.MAX_TENSOR_BYTES_ENV, "1K")
    assert limits.check_tensor_size([16, 16], 4, "t") == 1024
    with pytest.raises(DataError, match=r"t of shape \[16, 17\].*over the 1 KiB limit"):
        limits.check_tensor_size([16, 17], 4, "t")
    # the product is taken in Python integers: extents past 2**63 do not wrap to a small size
    with pytest.raises(DataError, match="limit"):
        limits.check_tensor_size([2 ** 62, 4, 0 + 1], 1, "t")
    with pytest.raises(DataError, match="negative extent"):
        limits.check_tensor_size([3, -1], 1, "t")
    assert limits.check_tensor_size([0, 2 ** 70], 1, "t") == 0
