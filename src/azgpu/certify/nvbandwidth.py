"""nvbandwidth's output (NVIDIA/nvbandwidth): one bandwidth matrix per testcase, read.

Per testcase: `Running <testcase>.`, a description ("memcpy CE GPU(row) -> GPU(column) bandwidth
(GB/s)", "memcpy CE CPU(row) -> GPU(column) ..."), a header of column indices, one row per source
(`0  N/A  370.90 ...`; older versions write 0.00 on the diagonal), then `SUM <testcase> <value>` and,
in newer versions, `COEFFICIENT_OF_VARIATION`. A testcase the system cannot run is "Waived". The
header names the tool's version and the driver (`Driver Version: 570.133.20`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .bounded import OutputError, integer, lines_of, number, printable

MAX_SIZE = 1024  # GPUs in one matrix (a multinode run of an NVL72 rack has 72)
_RUNNING = re.compile(r"^Running (\w{1,80})\.?\s*$")
_SUM = re.compile(r"^SUM (\w{1,80}) (\S+)\s*$")


@dataclass(frozen=True)
class Matrix:
    testcase: str
    description: str
    columns: tuple[int, ...]
    rows: tuple[tuple[int, tuple[float | None, ...]], ...]
    total: float | None = None

    def values(self) -> list[float]:
        """Every measured value, the diagonal (N/A, or 0.00 in older versions) left out."""
        out = []
        square = self.square
        for source, row in self.rows:
            for column, value in zip(self.columns, row, strict=True):
                if value is not None and not (column == source and square):
                    out.append(value)
        return out

    @property
    def square(self) -> bool:
        return len(self.rows) > 1 and len(self.rows) == len(self.columns)

    def per_gpu(self) -> dict[int, float]:
        """Each GPU's lowest value: its column for host<->device, its row and column between GPUs."""
        out: dict[int, float] = {}
        square = self.square
        for source, row in self.rows:
            for column, value in zip(self.columns, row, strict=True):
                if value is None or (square and column == source):
                    continue
                for gpu in ((source, column) if square else (column,)):
                    if gpu not in out or value < out[gpu]:
                        out[gpu] = value
        return out


@dataclass(frozen=True)
class NvbandwidthRun:
    matrices: dict[str, Matrix]
    version: str | None = None
    driver: str | None = None
    devices: tuple[str, ...] = ()
    waived: int = 0


def _value(token: str, where: str) -> float | None:
    return None if token == "N/A" else number(token, where)


def parse(text: object, what: str = "nvbandwidth") -> NvbandwidthRun:
    lines = lines_of(text, what)
    matrices: dict[str, Matrix] = {}
    version = driver = None
    devices: list[str] = []
    waived = 0
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("nvbandwidth Version:") and version is None:
            version = printable(line.split(":", 1)[1], 40)
        elif line.startswith("Driver Version:") and driver is None:
            driver = printable(line.split(":", 1)[1], 40)
        elif re.match(r"^Device \d+: ", line) and len(devices) < MAX_SIZE:
            devices.append(printable(line.split(":", 1)[1], 80))
        elif line.startswith("Waived"):
            waived += 1
        elif m := _RUNNING.match(line):
            matrix, i = _matrix(lines, i + 1, m.group(1), what)
            if len(matrices) >= 64:
                raise OutputError(f"{what}: more than 64 testcases")
            matrices[matrix.testcase] = matrix
            continue
        i += 1
    if not matrices:
        raise OutputError(f"{what}: no bandwidth matrix (no testcase ran, or the output was cut off)")
    return NvbandwidthRun(matrices, version, driver, tuple(devices), waived)


def _matrix(lines: list[str], i: int, testcase: str, what: str) -> tuple[Matrix, int]:
    if i + 1 >= len(lines):
        raise OutputError(f"{what}: {testcase} ends before its matrix")
    description = printable(lines[i], 120)
    header = lines[i + 1].split()
    where = f"{what}, line {i + 2}"
    if not header or len(header) > MAX_SIZE or not all(h.isdigit() for h in header):
        raise OutputError(f"{where}: {testcase}'s column header is not a list of GPU indices")
    columns = tuple(integer(h, where) for h in header)
    rows: list[tuple[int, tuple[float | None, ...]]] = []
    total = None
    i += 2
    while i < len(lines):
        line = lines[i].strip()
        where = f"{what}, line {i + 1}"
        if not line:
            i += 1
            continue
        if m := _SUM.match(line):
            if m.group(1) == testcase:
                total = number(m.group(2), where)
            i += 1
            break
        fields = line.split()
        if not fields[0].isdigit():
            break  # the next testcase, a note, COEFFICIENT_OF_VARIATION ...
        if len(fields) != len(columns) + 1:
            raise OutputError(f"{where}: a row of {len(fields) - 1} values under {len(columns)} columns")
        if len(rows) >= MAX_SIZE:
            raise OutputError(f"{what}: {testcase} has more than {MAX_SIZE} rows")
        values = tuple(_value(t, where) for t in fields[1:])
        if any(v is not None and v < 0 for v in values):
            raise OutputError(f"{where}: a negative bandwidth")
        rows.append((integer(fields[0], where), values))
        i += 1
    if not rows:
        raise OutputError(f"{what}: {testcase} has no rows (the output may be cut off)")
    return Matrix(testcase, description, columns, tuple(rows), total), i
