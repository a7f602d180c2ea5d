"""Writing rendered templates into --out-dir: all files or none, never through a symlink.

Every file is first written to a temporary directory inside the target directory (so the final
rename stays on one file system) and moved into place only once all of them were written. A
rename replaces whatever is at the target path, a symlink included, and never writes to where a
symlink points: a symlinked main.json cannot make azgpu overwrite another file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


def _error(message: str, remedy: str = "pass a writable --out-dir") -> InputError:
    return InputError(message, code="INVALID_OUT_DIR", remedy=remedy)


def write_files(out_dir: str, files: dict[str, str], *, private: frozenset[str] | set[str] = frozenset()) -> Path:
    """Write every file of `files` (name -> text) into out_dir, or none of them; returns the directory.

    private: names written readable by the owner only (0600): parameter files may hold cloud-init in clear.
    """
    if not out_dir.strip() or "\0" in out_dir:
        raise _error("--out-dir is empty" if not out_dir.strip() else "--out-dir is not a valid path",
                     "pass a directory, e.g. --out-dir out")
    directory = Path(out_dir).expanduser()
    if directory.exists() and not directory.is_dir():
        raise _error(f"--out-dir '{out_dir}' is a file", "pass a directory path")
    for name in files:
        target = directory / name
        if target.is_dir() and not target.is_symlink():
            raise _error(f"'{target}' is a directory, where azgpu would write {name}",
                         "remove it or pass another --out-dir")
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # A private staging directory beside the files (os.replace is atomic within one file system), made
        # as tempfile.mkdtemp makes one (0700, a random name), without importing tempfile, shutil and random:
        # ~10 ms of a cold render (issue #31).
        staging = directory / f".azgpu-render-{os.urandom(8).hex()}"
        staging.mkdir(mode=0o700)
    except OSError as exc:
        _remove_created(missing)
        raise _error(f"cannot write to '{out_dir}': {exc.strerror}") from None
    try:
        for name, text in files.items():
            # UTF-8 whatever the locale: tag values and descriptions may hold any character.
            opener = _owner_only if name in private else None
            with open(staging / name, "x", encoding="utf-8", newline="\n", opener=opener) as fh:
                fh.write(text)
        for name in files:
            os.replace(staging / name, directory / name)
    except OSError as exc:
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
        _remove_created(missing)
        raise _error(f"cannot write to '{out_dir}': {exc.strerror}") from None
    try:
        staging.rmdir()  # empty: every file was moved out
    except OSError:
        pass
    return directory


def _owner_only(path: str, flags: int) -> int:
    """open()'s opener for a file only its owner may read or write (0600), from its creation on."""
    return os.open(path, flags, 0o600)


def _remove_created(created: list[Path]) -> None:
    """Remove the directories this call created (deepest first), so a failure leaves nothing behind."""
    for path in created:
        try:
            path.rmdir()
        except OSError:
            return
