"""What a scale set references besides its network: a proximity placement group and user-assigned identities."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ArmError, invalid_reference
from ..skus import normalize_location

if TYPE_CHECKING:
    from ..backend import Backend


def check_ppg(backend: Backend, vmss: dict) -> None:
    ref = ((vmss.get("properties") or {}).get("proximityPlacementGroup") or {}).get("id")
    if not ref:
        return
    ppg = backend.find(ref)
    if ppg is None or normalize_location(ppg.get("location", "")) != vmss["location"]:
        raise invalid_reference(ref, vmss["id"])
    zones = {str(z) for z in ppg.get("zones") or ()}
    if zones and not {str(z) for z in vmss.get("zones") or ()} <= zones:
        # A group pinned to a zone takes only scale sets in that zone (Learn: Proximity placement groups).
        raise ArmError(400, "BadRequest", f"The proximity placement group {ref} is in zone(s) {sorted(zones)}; the "
                                          f"scale set asks for {sorted(vmss.get('zones') or [])}.")


def check_identities(backend: Backend, vmss: dict) -> None:
    """A missing user-assigned identity fails the PUT with 400 FailedIdentityOperation, the shape users report
    for it (e.g. Azure/azure-libraries-for-net#690, Azure/azure-policy#1311)."""
    identity = vmss.get("identity") or {}
    for rid in (identity.get("userAssignedIdentities") or {}):
        if backend.find(rid) is None:
            inner = '{"error":{"code":"BadRequest","message":"Resource \'' + rid + '\' was not found."}}'
            raise ArmError(400, "FailedIdentityOperation",
                           f"Identity operation for resource '{vmss['id']}' "
                           "failed with error 'Failed to perform resource identity operation. Status: 'BadRequest'. "
                           f"Response: '{inner}'.'.")
