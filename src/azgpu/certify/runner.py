"""What the certification suite asks of whatever runs its steps: Azure's Run Command (azgpu.deploy.certify)
or the fake's hardware model (azgpu.testing.fabric), the same questions, the same answers.

`per_node(mode, nodes, settings)` runs one step on each node at once and returns each node's Output:
the tool's output as it printed it, how long the step ran on the node's own clock, and why there is no
output when there is none. `fabric(jobs)` runs one round of multi-node jobs at once (collectives, pairs
of nodes testing each InfiniBand port) and returns each job's Output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import AzureError


class RoundFailed(AzureError):
    """A round of the fabric did not run (its launcher did not answer, a node refused the key):
    nothing can be concluded from it, about any node."""

    default_code = "CERTIFY_ROUND_FAILED"


@dataclass(frozen=True)
class NodeInfo:
    name: str  # the computer name Azure reports (never one a node printed)
    scale_set: str = ""
    instance_id: str = ""
    resource_id: str = ""
    ip: str | None = None
    physical_host: str | None = None
    vm_id: str | None = None
    rack: str | None = None  # the NVLink domain of a GB200/GB300 rack, None elsewhere


@dataclass(frozen=True)
class Output:
    text: str | None
    seconds: float = 0.0
    error: str | None = None  # no output: why (unreachable, timed out, refused ...)
    image: bool = False  # the tool is missing from the image: not the host's fault
    versions: dict[str, str] = field(default_factory=dict)
    pages: int = 1  # Run Commands it took to bring the output back


@dataclass(frozen=True)
class Job:
    kind: str  # collective | ibpair
    nodes: tuple[str, ...]
    op: str = "all_reduce"  # all_reduce | alltoall (nccl-tests' names: all_reduce_perf, alltoall_perf)
    fabric: str = "ib"  # ib | mnnvl (a rack's multi-node NVLink)
    min_bytes: str = "8G"
    max_bytes: str = "16G"

    def describe(self) -> str:
        if self.kind == "ibpair":
            return f"ib_write_bw {self.nodes[0]} -> {self.nodes[1]}"
        return f"{self.op} over {len(self.nodes)} node(s) ({self.fabric})"


class Runner(Protocol):
    def per_node(self, mode: str, nodes: Sequence[NodeInfo], settings: dict[str, object]) -> dict[str, Output]: ...

    def fabric(self, jobs: Sequence[Job]) -> list[Output]: ...
