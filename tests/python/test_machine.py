"""braze.machine's facts about the host: the L2 cache size the CPU's fused
GEMM sizes its panels by (codegen/cpp/gemm.py)."""

import pytest

from braze.machine import l2_cache_bytes


def _caches(tmp_path, levels_and_sizes):
    for number, (level, size) in enumerate(levels_and_sizes):
        index = tmp_path / f"index{number}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "size").write_text(f"{size}\n")
    return tmp_path


@pytest.mark.parametrize("size,expected", [("2048K", 2 << 20), ("1M", 1 << 20), ("524288", 1 << 19)])
def test_the_l2_size_is_read_from_sysfs(tmp_path, size, expected):
    caches = _caches(tmp_path, [(1, "48K"), (1, "32K"), (2, size), (3, "32768K")])
    assert l2_cache_bytes(caches) == expected


def test_a_system_that_does_not_say_gets_one_mib(tmp_path):
    assert l2_cache_bytes(tmp_path / "missing") == 1 << 20
    assert l2_cache_bytes(_caches(tmp_path, [(1, "48K"), (2, "unknown")])) == 1 << 20
