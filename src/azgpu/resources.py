"""Where the shipped data lives: inside the wheel (azgpu/data/) or at the checkout's root."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """profiles/ or templates/: the wheel's copy (azgpu/data/) first, then the source checkout's."""
    for candidate in (_HERE / "data" / name, _HERE.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"azgpu data folder '{name}' is missing from {_HERE} and {_HERE.parents[1]}")
