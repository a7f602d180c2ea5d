"""Where the shipped data lives: inside the wheel (azgpu/data/) or at the checkout's root."""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import sys
import zlib
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """profiles/: the wheel's copy (azgpu/data/) first, then the source checkout's."""
    for candidate in (_HERE / "data" / name, _HERE.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"azgpu data folder '{name}' is missing from {_HERE} and {_HERE.parents[1]}")


def read_toml(path: Path) -> dict[str, Any]:
    """A shipped TOML file, parsed (tomllib's errors as tomllib raises them).

    Parsing profiles/ took a third of what `provision render` does after its imports, so the
    parsed data is kept between runs in a per-user cache directory together with the file's bytes,
    and used only while the file is byte for byte the same.
    """
    raw = path.read_bytes()
    cached = _cache_file(path)
    if cached is not None:
        try:
            source, data = marshal.loads(cached.read_bytes())
            if source == raw:
                return data
        except (OSError, EOFError, ValueError, TypeError):
            pass  # missing or damaged: parse again
    import tomllib

    data = tomllib.loads(raw.decode())
    if cached is not None:
        tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(marshal.dumps((raw, data)))
            os.replace(tmp, cached)
        except (OSError, ValueError):  # not writable, or a value marshal cannot store (datetimes)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    return data


def cache_dir() -> Path | None:
    """azgpu's per-user cache directory (parsed profiles, retail prices), or None when there is no
    safe one: it must be a directory of this user that nobody else can write to."""
    if not hasattr(os, "getuid"):
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "azgpu"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(base)
    except (OSError, RuntimeError):
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return base


def _cache_file(path: Path) -> Path | None:
    base = cache_dir()
    if base is None:
        return None
    key = zlib.crc32(str(path.resolve()).encode())
    return base / f"toml-{key:08x}-py{sys.version_info[0]}{sys.version_info[1]}.marshal"
