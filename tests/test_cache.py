"""The per-user cache of parsed TOML: used only while the file is unchanged, never trusted blindly."""

from __future__ import annotations

import os

import pytest

from azgpu import shipped_data as resources


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "azgpu"


def test_second_read_comes_from_the_cache(tmp_path, cache):
    src = tmp_path / "a.toml"
    src.write_text('x = 1\n')
    assert resources.read_toml(src) == {"x": 1}
    assert len(list(cache.glob("toml-*.marshal"))) == 1


def test_a_changed_file_is_parsed_again(tmp_path, cache):
    src = tmp_path / "a.toml"
    src.write_text('x = 1\n')
    resources.read_toml(src)
    src.write_text('x = 2\n')
    assert resources.read_toml(src) == {"x": 2}


def test_a_damaged_cache_entry_is_parsed_again(tmp_path, cache):
    src = tmp_path / "a.toml"
    src.write_text('x = 1\n')
    resources.read_toml(src)
    (entry,) = cache.glob("toml-*.marshal")
    entry.write_bytes(b"\x00garbage")
    assert resources.read_toml(src) == {"x": 1}


def test_a_cache_directory_others_can_write_to_is_not_used(tmp_path, cache):
    cache.mkdir(parents=True)
    os.chmod(cache, 0o777)
    assert resources.cache_dir() is None
    src = tmp_path / "a.toml"
    src.write_text('x = 1\n')
    assert resources.read_toml(src) == {"x": 1}
    assert not list(cache.glob("toml-*"))


def test_invalid_toml_still_raises_tomllibs_error(tmp_path, cache):
    import tomllib

    src = tmp_path / "bad.toml"
    src.write_text("x = \n")
    with pytest.raises(tomllib.TOMLDecodeError):
        resources.read_toml(src)
