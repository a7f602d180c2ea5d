"""Build the Debian root the real-Slurm tests run a second Slurm version in (tests/slurm/test_slurmctld.py).

    python tools/slurm_test_root.py [--suite trixie] [--dest /var/cache/azgpu/slurm-roots]

Debian 13 (trixie) ships Slurm 24.11 (facts 15.1): `mmdebstrap --variant=apt` with Debian's slurmctld,
slurmd, munge and slurm-client makes a root of it in about a minute. The controller in that root runs
azgpu's resume and suspend programs, so azgpu is installed there as a user installs it on a
controller: a virtual environment (/opt/azgpu) with azgpu's dependencies, downloaded here by the host's
pip (with the host's index and certificates) as wheels for the root's Python and installed from them
inside the root, which needs no network; the test, which must not reach the network, then installs the checkout itself
into it (pip install --no-index --no-deps, into its own overlay), so the root never holds an old azgpu. The root's
azgpu-root.json says what it holds; the test skips, saying why, when it is missing or stale.

Needs root (chroot) and mmdebstrap; CI (.ci/run) runs it before the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("slurmctld", "slurmd", "munge", "slurm-client", "python3", "python3-venv", "ca-certificates")
VENV = "/opt/azgpu"
STAMP = "azgpu-root.json"


def requirements() -> list[str]:
    """What the root's virtual environment holds: azgpu's dependencies, and its build backend (so the
    test installs the checkout without the network)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    return sorted([*project["project"]["dependencies"], *project["build-system"]["requires"]])


def stamp(suite: str) -> dict:
    return {"suite": suite, "packages": list(PACKAGES), "venv": VENV, "requirements": requirements()}


def _in_root(root: Path, *argv: str, capture: bool = False) -> str:
    """A command in the root with /proc and /dev mounted for it alone."""
    script = 'set -e; R=$1; shift; mount -t proc proc "$R/proc"; mount --rbind /dev "$R/dev"; exec chroot "$R" "$@"'
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", script, "in-root",
                           str(root), *argv], check=True, capture_output=capture, text=True)
    return done.stdout if capture else ""


def _wheels(root: Path, into: Path) -> None:
    """The requirements as wheels for the root's Python, downloaded by this host's pip."""
    version = _in_root(root, "python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])", capture=True).strip()
    machine = os.uname().machine
    platforms = [f"manylinux_2_{n}_{machine}" for n in (17, 28, 34)] + [f"manylinux2014_{machine}", f"linux_{machine}"]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", version,
                    "--implementation", "cp", *(a for p in platforms for a in ("--platform", p)), "-d", str(into),
                    *requirements()], check=True)


def current(target: Path, suite: str) -> bool:
    """Whether the root at target holds what this checkout needs (its stamp)."""
    try:
        return json.loads((target / STAMP).read_text()) == stamp(suite)
    except (OSError, ValueError):
        return False


def build(suite: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{suite}-", dir=dest))
    root = work / "root"
    try:
        subprocess.run(["mmdebstrap", "--variant=apt", "--include=" + ",".join(PACKAGES), suite, str(root)],
                       check=True)
        _in_root(root, "python3", "-m", "venv", VENV)
        wheels = root / "tmp" / "azgpu-wheels"
        _wheels(root, wheels)
        _in_root(root, f"{VENV}/bin/pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--find-links",
                 "/tmp/azgpu-wheels", *requirements())
        shutil.rmtree(wheels)
        (root / STAMP).write_text(json.dumps(stamp(suite), indent=1) + "\n")
        target = dest / suite
        if target.exists():
            shutil.rmtree(target)
        os.replace(root, target)
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="trixie")
    parser.add_argument("--dest", type=Path, default=Path(os.environ.get("AZGPU_SLURM_ROOTS",
                                                                         "/var/cache/azgpu/slurm-roots")))
    parser.add_argument("--force", action="store_true", help="Build again even when the root is current.")
    args = parser.parse_args(argv)
    if not args.force and current(args.dest / args.suite, args.suite):
        print(f"{args.dest / args.suite} is current")
        return 0
    if os.geteuid() != 0 or not shutil.which("mmdebstrap"):
        print("needs root and mmdebstrap (apt-get install mmdebstrap)", file=sys.stderr)
        return 2
    print(build(args.suite, args.dest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
