"""Reading a file a user names (an SSH key, a cluster file, --custom-data) without trusting what it is.

A FIFO nobody writes to would block forever and /dev/zero would fill memory: only a regular file is
read, and never more than its limit allows.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_bounded(path: Path, *, limit: int, follow_links: bool = True) -> bytes:
    """At most limit + 1 bytes of a regular file, without blocking on FIFOs or devices (nor following a
    symbolic link at path when follow_links is false: OSError ELOOP)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags if follow_links else flags | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a device, FIFO or socket)"
            raise IsADirectoryError(kind)
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
