"""What a node needs besides its image: the OFED driver InfiniBand needs, the GPU driver extensions,
accelerated networking. Decided once, before the rules check the request: rules.py reports each
choice, spec.py keeps it in the Spec and plan.py writes it into the scale sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

if TYPE_CHECKING:
    from .images import Image
    from .profiles import Extension, Profile, Size


class Drivers(Struct, frozen=True):
    # The profile's pinned OFED (e.g. "doca:2.9.1"), installed by cloud-init on an InfiniBand size
    # whose image has none; None when the image carries one or InfiniBand is not there.
    install_ofed: str | None
    # GPU driver extensions the plan adds (the profile's, for images without the driver).
    extensions: tuple[Extension, ...]
    accelerated_networking: bool


def decide_drivers(profile: Profile, size: Size, image: Image | None) -> Drivers:
    return Drivers(_ofed(profile, size, image), _extensions(profile, image),
                   bool(size.cap("accelerated_networking")))


def _ofed(profile: Profile, size: Size, image: Image | None) -> str | None:
    spec = profile.ofed
    if (not size.infiniband or not spec or image is None or not image.known or image.ofed
            or image.is_windows):
        return None
    return spec["pinned"]


def _extensions(profile: Profile, image: Image | None) -> tuple[Extension, ...]:
    if image is None:
        return ()
    chosen = []
    os_family = "windows" if image.is_windows else "linux"
    for ext in profile.extensions:
        if ext.when == "non-hpc-image" and image.hpc:
            continue
        if ext.os and os_family not in ext.os:
            continue
        chosen.append(ext)
    return tuple(chosen)


def cloud_init_ofed(version: str) -> str:
    """cloud-config installing the profile's pinned OFED on an image that has none."""
    kind, _, number = version.partition(":")
    if kind == "doca":
        script = (
            f"# DOCA-OFED {number} from NVIDIA's repository (profile pin)\n"
            ". /etc/os-release\n"
            f"curl -fsSL https://linux.mellanox.com/public/repo/doca/{number}/${{ID}}${{VERSION_ID}}/$(uname "
            "-m)/GPG-KEY-Mellanox.pub | gpg --dearmor -o /usr/share/keyrings/mellanox.gpg || true\n"
            "echo \"deb [signed-by=/usr/share/keyrings/mellanox.gpg] "
            f"https://linux.mellanox.com/public/repo/doca/{number}/${{ID}}${{VERSION_ID}}/$(uname -m)/ ./\" > "
            "/etc/apt/sources.list.d/doca.list\napt-get update && apt-get install -y doca-ofed\n"
        )
    else:
        script = (
            f"# MLNX_OFED {number} (profile pin)\n"
            ". /etc/os-release\n"
            f"pkg=MLNX_OFED_LINUX-{number}-${{ID}}${{VERSION_ID}}-$(uname -m)\n"
            f"curl -fsSL https://content.mellanox.com/ofed/MLNX_OFED-{number}/$pkg.tgz | tar xz -C /tmp\n"
            "/tmp/$pkg/mlnxofedinstall --add-kernel-support --force\n"
            "/etc/init.d/openibd restart\n"
        )
    lines = ["#cloud-config", "runcmd:", "  - |"] + [f"    {line}" for line in script.splitlines()]
    return "\n".join(lines) + "\n"
