"""perftest's ib_write_bw report (linux-rdma/perftest), read.

The report: with --use_cuda, CUDA's set-up lines ("initializing CUDA", "[pid = ..] device name = [NAME]"),
then a dashed banner ("RDMA_Write BW Test", "Device : mlx5_ib0", "Number of qps", "Link type"), the
address lines, the header `#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]`
(MB/sec without --report_gbits) and one row per message size. A run with -D reports BW peak 0.00
and measures the average: the average is what the certification judges. A run that fails prints
perftest's own error lines ("Couldn't connect ...", "Failed status ...") and no row: that is a
result too (no bandwidth), not an unreadable output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .bounded import OutputError, integer, lines_of, number, printable

MAX_ROWS = 64
_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]")
_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
_QPS = re.compile(r"Number of qps\s*:\s*(\d+)")
_LINK = re.compile(r"Link type\s*:\s*(\w+)")
_GPU = re.compile(r"device name = \[([^\]]{1,80})\]")
_ERROR = re.compile(r"(Couldn't|Unable|Failed|ERROR|Error|error:|failed)")


@dataclass(frozen=True)
class BwRow:
    size: int
    iterations: int
    bw_peak: float
    bw_average: float
    msg_rate: float | None


@dataclass(frozen=True)
class PerftestRun:
    rows: tuple[BwRow, ...]
    unit: str = "Gb/sec"
    test: str | None = None
    device: str | None = None
    qps: int | None = None
    link_type: str | None = None
    cuda: bool = False  # GPUDirect: the buffer was CUDA memory (--use_cuda)
    gpu: str | None = None
    errors: tuple[str, ...] = ()

    @property
    def gbps(self) -> float | None:
        """The average bandwidth of the largest message, in Gb/s; None when the test gave no row."""
        if not self.rows:
            return None
        avg = max(self.rows, key=lambda r: r.size).bw_average
        return avg if self.unit == "Gb/sec" else round(avg * 8 / 1000, 3)  # MB/sec -> Gb/s


def parse(text: object, what: str = "ib_write_bw") -> PerftestRun:
    rows: list[BwRow] = []
    unit = None
    fields: dict = {"errors": []}
    for n, line in enumerate(lines_of(text, what), 1):
        where = f"{what}, line {n}"
        header = _HEADER.match(line)
        if header:
            if header.group(1) != header.group(2):
                raise OutputError(f"{where}: peak and average in different units")
            unit = f"{header.group(1)}/sec"
            continue
        f = line.split()
        if unit and len(f) in (4, 5) and f[0].isdigit():
            if len(rows) >= MAX_ROWS:
                raise OutputError(f"{what}: more than {MAX_ROWS} result rows")
            row = BwRow(integer(f[0], where), integer(f[1], where), number(f[2], where), number(f[3], where),
                        number(f[4], where) if len(f) == 5 else None)
            if min(row.size, row.iterations, row.bw_peak, row.bw_average) < 0:
                raise OutputError(f"{where}: a negative size or bandwidth")
            rows.append(row)
            continue
        if "Test" in line and "BW" in line and "test" not in fields and line.strip().endswith(" Test"):
            fields["test"] = printable(line, 60)
        elif ":" in line:
            if "Device" in line and "device" not in fields and (m := _DEVICE.search(line)):
                fields["device"] = printable(m.group(1), 40)
            elif "qps" in line and "qps" not in fields and (m := _QPS.search(line)):
                fields["qps"] = integer(m.group(1), where)
            elif "Link type" in line and "link_type" not in fields and (m := _LINK.search(line)):
                fields["link_type"] = printable(m.group(1), 20)
        if "device name" in line and "gpu" not in fields and (m := _GPU.search(line)):
            fields["gpu"] = printable(m.group(1), 80)
        if "initializing CUDA" in line or "cuMemAlloc" in line:
            fields["cuda"] = True
        if len(fields["errors"]) < 5 and "WARNING" not in line and _ERROR.search(line):
            fields["errors"].append(printable(line, 160))
    fields["errors"] = tuple(fields["errors"])
    return PerftestRun(tuple(rows), unit or "Gb/sec", **fields)
