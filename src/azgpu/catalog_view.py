"""Profiles and images as plain data for `provision profiles ...` and `provision images list`."""

from __future__ import annotations

from typing import Any

from .images import catalog
from .profiles import Profile, Size, list_profiles
from .sources import cite, describe_seed, seed_title


def profile_row(profile: Profile) -> dict[str, Any]:
    default = profile.size(profile.default_size)
    return {
        "id": profile.id,
        "series": profile.series,
        "sizes": [s.name for s in profile.sizes],
        "gpus": f"{default.gpus} x {default.gpu_model}",
        "infiniband": f"{default.ib_ports} x {default.ib_rate_gbps} Gb/s" if default.infiniband else "no",
        "arch": default.arch,
        "retired": default.retired or "",
        "documents": [seed_title(s) for s in profile.seeds],  # other documents describing the series
    }


def list_rows() -> list[dict[str, Any]]:
    return [profile_row(p) for p in list_profiles()]


def size_detail(size: Size) -> dict[str, Any]:
    return {
        "name": size.name,
        "aliases": list(size.aliases),
        "vcpus": size.vcpus,
        "memory_gib": size.memory_gib,
        "gpus": size.gpus,
        "gpu_model": size.gpu_model + (f" ({size.gpu_fraction} GPU)" if size.gpu_fraction else ""),
        "gpu_memory_gib": size.gpu_memory_gib,
        "temp_disk_gib": size.temp_disk_gib,
        "max_data_disks": size.max_data_disks,
        "max_nics": size.max_nics,
        "infiniband_ports": size.ib_ports,
        "infiniband_gbps": size.ib_rate_gbps,
        "source": cite(size.source),
        "capabilities": {k: {"value": f.value, "source": cite(f.source)} for k, f in size.facts.items()},
        "health": {k: {"value": f.value, "source": cite(f.source)} for k, f in size.health.facts.items()}
        if size.health else {},
        "notes": size.notes,
    }


def _cited(section: dict[str, Any]) -> dict[str, Any]:
    """A profile section with its source keys spelled out."""
    return {k: (cite(v) if k == "source" else v) for k, v in section.items()}


def profile_detail(profile: Profile) -> dict[str, Any]:
    return {
        "id": profile.id,
        "series": profile.series,
        "description": profile.description,
        "documents": [describe_seed(s) for s in profile.seeds],
        "default_size": profile.default_size,
        "sizes": [size_detail(s) for s in profile.sizes],
        "images": {
            "default": profile.default_image,
            "recommended": list(profile.recommended_images),
            "source": cite(profile.images_source),
        },
        "ofed": _cited(profile.ofed),
        "nccl": _cited(profile.nccl),
        "extensions_with_non_hpc_image": [
            {"type": e.type, "publisher": e.publisher, "version": e.type_handler_version, "source": cite(e.source)}
            for e in profile.extensions
        ],
        "requirements": [
            {"rule": r.name, **{k: v for k, v in r.args.items()}, "source": cite(r.source)} for r in profile.rules
        ],
        "scale_set": _cited(profile.scale_set),
        "placement": _cited(profile.placement or {}),
        **({"vertical_connect": _cited(profile.vertical_connect)} if profile.vertical_connect else {}),
        "discrepancies": [
            {"document": seed_title(d.seed), "claim": d.claim, "documented": d.documented, "source": cite(d.source)}
            for d in profile.discrepancies
        ],
    }


def image_rows(profile_id: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for img in catalog().values():
        if profile_id and profile_id not in img.series:
            continue
        rows.append({
            "name": img.name, "urn": img.urn, "os": img.os, "generations": list(img.generations),
            "architecture": img.architecture, "hpc": img.hpc, "ofed": img.ofed, "cuda": img.cuda, "imex": img.imex,
            "series": list(img.series), "legacy": img.legacy, "verified": img.verified,
        })
    return rows


def image_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `images list -o table` shows: one line per image within 120 columns; the legacy note only
    as a flag (-o json has it in full, with the URN, OFED, series and verification)."""
    keep = ("name", "os", "generations", "architecture", "hpc", "cuda")
    return [{**{k: row[k] for k in keep}, "legacy": "yes" if row["legacy"] else ""} for row in rows]


def profile_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `profiles list -o table` shows: one line per profile within 120 columns (-o json has every
    size and the other documents describing the series)."""
    return [{"id": r["id"], "series": r["series"],
             "sizes": r["sizes"][0] + (f" +{len(r['sizes']) - 1}" if len(r["sizes"]) > 1 else ""), "gpus": r["gpus"],
             "infiniband": r["infiniband"], "arch": r["arch"], "retired": r["retired"]}
            for r in rows]
