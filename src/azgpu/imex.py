"""NVIDIA IMEX on GB200/GB300 racks under Slurm: who creates IMEX channels, and when. One answer for the
node check (health/node_check.sh, AZGPU_IMEX_SERVICE), the power-saving nodes (azgpu.slurm: the fragment and
the node bootstrap) and `provision outputs --format slurm` (scheduler_files).

azgpu's choice is Azure CycleCloud's (Azure/cyclecloud-slurm: azure-slurm-install/imex_prolog.sh,
imex_epilog.sh, templates/slurm.conf.template):
- The channel is the image's. The Azure HPC GB images load the driver with NVreg_CreateImexChannel0=1
  (Azure/azhpc-images components/install_nvidiagpudriver.sh, R-azhpc-imex), so
  /dev/nvidia-caps-imex-channels/channel0 exists whenever the node is up, inside a job or not; azgpu's
  node check requires it always.
- The IMEX daemon serves one job at a time. A prolog, run on every node of an allocation
  (PrologFlags=alloc), writes the job's node addresses to /etc/nvidia-imex/nodes_config.cfg and
  (re)starts nvidia-imex; an epilog empties the list and stops it. Outside a job the service is
  stopped, so the node check asks only that the image has it (AZGPU_IMEX_SERVICE=installed).
- SwitchType=switch/none, never switch/nvidia_imex: that plugin (Slurm 24.05+) removes the existing
  IMEX channels when slurmd starts (SchedMD/slurm CHANGELOG/slurm-24.05.md, 24.05.1), which would
  take channel0 away from every node, and it exists only from 24.05 while azgpu serves 22.05 on.

The node bootstrap installs both scripts on GB nodes; `provision outputs --format slurm` writes them
for clusters whose Slurm the user runs. Prolog and Epilog are slurm.conf keys the user's own file may
set, so the fragment writes them as lines to merge: slurm.conf(5) lets each be a glob
("/etc/slurm/prolog.d/*"), so a site's own prolog goes into the same directory.
"""

from __future__ import annotations

# slurm.conf(5) Prolog/Epilog take a glob: azgpu's scripts go in a directory beside the user's own.
PROLOG_DIR = "/etc/slurm/prolog.d"
EPILOG_DIR = "/etc/slurm/epilog.d"
PROLOG_PATH = PROLOG_DIR + "/azgpu-imex"
EPILOG_PATH = EPILOG_DIR + "/azgpu-imex"
NODES_CONFIG = "/etc/nvidia-imex/nodes_config.cfg"  # IMEX_NODE_CONFIG_FILE of the image's config.cfg

_PROLOG = r"""#!/bin/bash
# Slurm Prolog written by azgpu (PrologFlags=alloc: on every node of an allocation): the job's nodes are
# this node's IMEX domain. nvidia-imex is (re)started with their addresses; the image made channel0.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
systemctl cat nvidia-imex.service >/dev/null 2>&1 || exit 0  # not a GB image: nothing to do
nodes=${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}
[ -n "$nodes" ] || exit 0
timeout 15 systemctl stop nvidia-imex.service || true
# Slurm names are not host names: each node's address is its NodeAddr (the VM's private IP).
timeout 30 scontrol show node "$nodes" -o | grep -oE 'NodeAddr=[0-9.]+' | cut -d= -f2 >__NODES__.tmp || exit 1
mv -f __NODES__.tmp __NODES__
timeout 60 systemctl start nvidia-imex.service
"""

_EPILOG = r"""#!/bin/bash
# Slurm Epilog written by azgpu: the job's IMEX domain ends with it.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
systemctl cat nvidia-imex.service >/dev/null 2>&1 || exit 0
: >__NODES__
timeout 15 systemctl stop nvidia-imex.service || true
exit 0
"""


def prolog() -> str:
    return _PROLOG.replace("__NODES__", NODES_CONFIG)


def epilog() -> str:
    return _EPILOG.replace("__NODES__", NODES_CONFIG)


def files() -> dict[str, str]:
    """The scripts by file name, for `slurm config --out-dir` and `outputs --format slurm`."""
    return {"prolog.d-azgpu-imex": prolog(), "epilog.d-azgpu-imex": epilog()}


def node_files() -> list[tuple[str, str, str]]:
    """(path, mode, content) for the node bootstrap."""
    return [(PROLOG_PATH, "0755", prolog()), (EPILOG_PATH, "0755", epilog())]


def fragment_lines() -> list[str]:
    return [
        "# NVIDIA IMEX (GB200/GB300): the job's nodes form its IMEX domain, as Azure CycleCloud's imex_prolog.sh",
        "# does; the image's channel0 stays. Merge into slurm.conf (Prolog/Epilog are globs: move your own into these",
        "# directories):",
        "# never SwitchType=switch/nvidia_imex, which removes the image's IMEX channels when slurmd starts (24.05.1).",
        "#SwitchType=switch/none",
        "#PrologFlags=alloc",
        f"#Prolog={PROLOG_DIR}/*",
        f"#Epilog={EPILOG_DIR}/*",
    ]
