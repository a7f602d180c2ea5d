"""The --simulate state file: the fake's Store as JSON, shared by CLI processes under a file lock.

Each change (or read) of the state runs under the file's lock: the file is read again when another
process wrote it since, and written back when something changed. Two `provision --simulate`
commands at once thus both keep their resources; a process that held the lock too long makes the
other fail clearly (StateFileBusy).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from filelock import Timeout

from .errors import StateFileBusy, StateFileError
from .store import Store

# A request holds the lock for milliseconds; a wait this long means the other process is stuck.
LOCK_TIMEOUT = 60.0
MAX_STATE = 1 << 30  # bytes: a simulated cloud of thousands of nodes is a few MB
MAX_DEPTH = 64  # a saved resource nests a dozen levels


class StateFile:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if "\0" in str(self.path):
            raise StateFileError(self.path, "is not a valid path", "pass the path of a file")
        if self.path.exists() and not (self.path.is_file() or self.path.is_dir()):
            # A device or FIFO: reading it would never end (/dev/zero) or never start (a FIFO).
            raise StateFileError(self.path, "is not a regular file",
                                 "pass the path of a file: --simulate-state DIR/simulate.json")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateFileError(self.path, f"cannot be created: {exc.strerror}",
                                 "pass a --simulate-state FILE in a directory you can write") from None
        _can_lock(self.path)
        self._lock = _state_lock(self.path)
        self._synced: tuple | None = None  # the file as last read or written here (_signature)

    @contextmanager
    def locked(self, store: Store):
        """Hold the file's lock, with `store` brought up to what the file holds now."""
        try:
            self._lock.acquire()
        except Timeout:
            raise StateFileBusy(self.path, LOCK_TIMEOUT) from None
        except OSError as exc:
            raise StateFileError(self.path, f"cannot be locked: {exc.strerror}",
                                 "pass a --simulate-state FILE in a directory you can write") from None
        try:
            current = _signature(self.path)
            if current != self._synced:
                if current is None:
                    store.clear()  # deleted: an empty cloud, as a fresh file would be
                else:
                    load(store, self.path)
                self._synced = current
            yield
        finally:
            self._lock.release()

    def write(self, store: Store) -> None:
        """Save `store` to the file (call it while locked)."""
        save(store, self.path)
        self._synced = _signature(self.path)


def save(store: Store, path: str | os.PathLike) -> None:
    # Write then rename, so a CLI process reading the file never sees half of it; a failed write
    # leaves the previous state in place and no temporary file behind.
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(store.to_json(), fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load(store: Store, path: str | os.PathLike) -> None:
    """Load a saved state; StateFileError naming the file and the problem when it cannot be used."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except IsADirectoryError:
        raise StateFileError(path, "is a directory",
                             "pass the path of a file: --simulate-state DIR/simulate.json") from None
    except OSError as exc:
        raise StateFileError(path, f"cannot be read: {exc.strerror}") from None
    if not raw.strip():
        raise StateFileError(path, "is empty (a write was cut short?)")
    if len(raw) > MAX_STATE:
        raise StateFileError(path, f"is {len(raw)} bytes, more than a simulated cloud takes ({MAX_STATE})")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StateFileError(path, f"is not JSON ({exc.__class__.__name__}: {str(exc)[:80]})") from None
    except RecursionError:  # json.loads recurses: a file nested thousands of levels deep is not a state
        raise StateFileError(path, "is nested too deep to be a state") from None
    if _depth(data) > MAX_DEPTH:  # nor is one nested just below that: copying it would recurse as deep
        raise StateFileError(path, f"is nested deeper than {MAX_DEPTH} levels, which no state is")
    try:
        store.load_json(data)
    except ValueError as exc:
        raise StateFileError(path, str(exc)) from None


def _can_lock(path: Path) -> None:
    """The lock file can be made at all: filelock retries a lock it cannot create as if another process held
    it, so a path under /proc or /sys would wait LOCK_TIMEOUT seconds before saying anything."""
    lock = f"{path}.lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateFileError(path, f"cannot have its lock file '{lock}': {exc.strerror}",
                             "pass a --simulate-state FILE in a directory you can write") from None
    os.close(fd)


def _depth(data) -> int:
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def _state_lock(path: Path):
    """An inter-process lock beside the state file (filelock: fcntl on POSIX, msvcrt on Windows)."""
    from filelock import FileLock

    # thread_local=False: the fake's own RLock already serialises its threads; the file lock orders processes.
    return FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT, thread_local=False)


def _signature(path: Path) -> tuple | None:
    """What identifies one written version of the file (each save renames a new file into place)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(path, f"cannot be read: {exc.strerror}") from None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns
