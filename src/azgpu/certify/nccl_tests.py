"""nccl-tests' output (all_reduce_perf, alltoall_perf, sendrecv_perf ...): the result table, read.

The layout is nccl-tests' own (src/common.cu): optional `# nThread ...` and `#  Rank N Group G Pid P on
HOST device D [BUS] NAME` lines, a three-line header, one row per message size -- size, count, type,
redop (`sum`, `none` for all-to-all), root, then out-of-place time, algbw, busbw, #wrong and the same
four in place (`N/A` where a test does not check) -- and the `# Out of bounds values` and `# Avg bus
bandwidth` trailer. NCCL's INFO and WARN lines, MPI's messages and anything else interleaved are
skipped; a line shaped like a row that does not read as one is an error, not a row skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .bounded import OutputError, integer, lines_of, number, printable

MAX_ROWS = 256
MAX_RANKS = 100_000
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s+[A-Za-z]")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_TEST = re.compile(r"#\s+Collective test starting:\s+(\w+)")


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    dtype: str
    redop: str
    root: int
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    in_place_busbw: float | None
    in_place_wrong: int | None


@dataclass(frozen=True)
class NcclRun:
    rows: tuple[Row, ...]
    test: str | None = None  # from '# Collective test starting: X' where the version prints it
    ranks: int = 0
    hosts: tuple[str, ...] = ()
    nccl_version: str | None = None
    out_of_bounds: int | None = None
    avg_busbw: float | None = None

    @property
    def largest(self) -> Row:
        return max(self.rows, key=lambda r: r.size)

    @property
    def busbw(self) -> float:
        """The bus bandwidth at the largest message size (GB/s): the better of out of place and in place,
        as nccl-tests' report reads; what the certification judges."""
        row = self.largest
        return max(row.busbw, row.in_place_busbw or 0.0)

    @property
    def wrong(self) -> int:
        return sum((r.wrong or 0) + (r.in_place_wrong or 0) for r in self.rows)


def _wrong(token: str, what: str) -> int | None:
    return None if token == "N/A" else integer(token, what)


def _row(line: str, where: str) -> Row:
    f = line.split()
    if len(f) not in (9, 13):
        raise OutputError(f"{where}: a result row of {len(f)} fields (nccl-tests prints 9 or 13)")
    in_place = (number(f[11], where), _wrong(f[12], where)) if len(f) == 13 else (None, None)
    if len(f) == 13:
        number(f[9], where)
        number(f[10], where)
    row = Row(size=integer(f[0], where), count=integer(f[1], where), dtype=printable(f[2], 16),
              redop=printable(f[3], 16), root=integer(f[4], where), time_us=number(f[5], where),
              algbw=number(f[6], where), busbw=number(f[7], where), wrong=_wrong(f[8], where),
              in_place_busbw=in_place[0], in_place_wrong=in_place[1])
    if row.size < 0 or row.busbw < 0 or row.algbw < 0:
        raise OutputError(f"{where}: a negative size or bandwidth")
    return row


def parse(text: object, what: str = "nccl-tests") -> NcclRun:
    """The result table of one nccl-tests run; OutputError when there is none or it does not read."""
    rows: list[Row] = []
    hosts: dict[str, None] = {}
    ranks = 0
    version = test = None
    oob = avg = None
    for n, line in enumerate(lines_of(text, what), 1):
        where = f"{what}, line {n}"
        if _ROW_START.match(line):
            if len(rows) >= MAX_ROWS:
                raise OutputError(f"{what}: more than {MAX_ROWS} result rows")
            rows.append(_row(line, where))
            continue
        rank = _RANK.match(line)
        if rank:
            ranks = max(ranks, integer(rank.group(1), where) + 1)
            if ranks > MAX_RANKS:
                raise OutputError(f"{what}: rank {ranks - 1} (at most {MAX_RANKS})")
            if len(hosts) < 4096:
                hosts.setdefault(printable(rank.group(2), 64))
            continue
        if (m := _NCCL_VERSION.search(line)) and version is None:
            version = m.group(1)
        elif (m := _TEST.match(line)) and test is None:
            test = m.group(1)
        elif line.startswith("# Out of bounds values"):
            tail = line.split(":", 1)[-1].split()
            oob = integer(tail[0], where) if tail else None
        elif line.startswith("# Avg bus bandwidth"):
            tail = line.split(":", 1)[-1].split()
            avg = number(tail[0], where) if tail else None
    if not rows:
        raise OutputError(f"{what}: no result rows (the test did not run, or its output was cut off)")
    return NcclRun(tuple(rows), test, ranks, tuple(hosts), version, oob, avg)
