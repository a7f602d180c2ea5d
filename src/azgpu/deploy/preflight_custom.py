"""Preflight of what a cluster references but does not create: gallery, community, direct-shared and
managed images, user-assigned identities and an existing proximity placement group. Reads only.

The same rules as for catalog images apply to what Azure reports of a custom image: Generation 2
only on Gen 2 sizes, Arm64 on Grace sizes, Linux, and a security type that fits the request. The SDK
models are read back in their REST shape (as_dict), the shape of the REST spec's examples.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from ..errors import Finding
from ..images import ImageId, PurchasePlan
from ..naming import location_name
from ..resource_types import PERMISSIONS, USER_ASSIGNED_IDENTITY
from ..sources import cite
from ..spec import Spec
from .arm import allowed, is_not_found, json_body, rest_shape, send

SOURCE_GALLERY = "Azure Compute Gallery API (az sig image-definition show, az sig image-version show)"
SOURCE_IMAGES = "Azure images API (az image show)"
SOURCE_MSI = "Managed identities API (az identity show)"
SOURCE_PPG = "Proximity placement groups API (az ppg show)"
SOURCE_PERMISSIONS = (f"Azure permissions API (Permissions - List For Resource, {PERMISSIONS.namespace} "
                      f"{PERMISSIONS.api_version})")
ASSIGN_ACTION = USER_ASSIGNED_IDENTITY.action("assign/action")
MSI_API = USER_ASSIGNED_IDENTITY.api_version
VMS_PER_REPLICA = 50  # "For every 50 VMs that you create concurrently, we recommend that you keep one replica" (D-acg)
# SecurityType values of a gallery image definition and the VMs each can create (Learn: Store and share images).
TRUSTED_LAUNCH_CAPABLE = {"trustedlaunchsupported", "trustedlaunch", "trustedlaunchandconfidentialvmsupported"}
ONLY_SECURE_VMS = {"trustedlaunch": "Trusted Launch", "confidentialvm": "Confidential"}


def _rest(model: Any) -> dict:
    """The REST shape on every SDK generation (SDK floors)."""
    return rest_shape(model) if hasattr(model, "as_dict") else dict(model or {})


def _body(response, deserialized, headers) -> dict:
    """`cls=` of a generated SDK call: the answer's JSON as Azure sent it. An SDK older than the
    field (imageState, endOfLifeDate ...) would drop what its model does not know."""
    return response.http_response.json()


def _get(call, *args, **kwargs) -> Any:
    """What a GET answers, or None when Azure answers 404 (any other error is raised)."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        if not is_not_found(exc):
            raise
        return None


def version_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in (name or "").split("."))


def _feature(props: dict, name: str) -> str | None:
    for feature in props.get("features") or []:
        if (feature.get("name") or "").lower() == name.lower():
            return feature.get("value")
    return None


def check_definition(pf, spec: Spec, label: str, props: dict, source: str) -> None:
    """A gallery image definition (or what a community/shared gallery shows of one) against the size and request."""
    size = spec.size
    os_type = props.get("osType") or ""
    if os_type and os_type.lower() != "linux":
        pf.findings.append(Finding(code="WINDOWS_IMAGE_UNSUPPORTED",
                                   message=f"{label} is a {os_type} image, but azgpu creates Linux "
                                                                "nodes only (SSH keys, linuxConfiguration)",
                                   remedy=f"use a Linux image, e.g. --image {spec.profile.default_image}",
                                   source=source))
    if (props.get("osState") or "").lower() == "specialized":
        pf.findings.append(Finding(code="IMAGE_SPECIALIZED",
                                   message=f"{label} is a specialized image: VMs created "
                                   "from it have no osProfile, so azgpu's admin "
                                   "user, SSH key and cloud-init cannot be applied",
                                   remedy="capture a generalized image (waagent "
                                          "-deprovision+user, then a Generalized definition)",
                                   source=cite(("D-sig",))))
    # "Hyper-V generation ... Default is generation 1" (Learn: Store and share images).
    generation = props.get("hyperVGeneration") or "V1"
    bootable = pf.capabilities.get("HyperVGenerations", ",".join(size.generations))
    if generation not in {g.strip() for g in bootable.split(",")}:
        pf.findings.append(Finding(code="IMAGE_GENERATION",
                                   message=f"{label} is Hyper-V generation {generation[1:]}; "
                                   f"{size.name} boots only {bootable} images (Azure fails with 'cannot boot "
                                   "Hypervisor Generation 1')",
                                   remedy="publish the image to a Generation 2 (V2) image definition and pass that one",
                                   source=source))
    arch = props.get("architecture") or "x64"
    size_arch = pf.capabilities.get("CpuArchitectureType", size.arch)
    if arch.lower() != size_arch.lower():
        pf.findings.append(Finding(code="IMAGE_ARCHITECTURE",
                                   message=f"{label} is {arch}; {size.name} has {size_arch} CPUs",
                                   remedy=f"publish an {size_arch} image definition and pass it", source=source))
    security = (_feature(props, "SecurityType") or "").strip()
    wanted = spec.security_type
    if wanted == "TrustedLaunch" and security.lower() not in TRUSTED_LAUNCH_CAPABLE:
        pf.findings.append(Finding(code="IMAGE_SECURITY_TYPE",
                                   message=f"{label} has SecurityType {security or 'none'}: "
                                   "Trusted Launch VMs need an image definition with SecurityType "
                                   "TrustedLaunchSupported or TrustedLaunch",
                                   remedy="use --security-type Standard, or publish the image to a "
                                          "TrustedLaunchSupported definition",
                                   source=cite(("D-tl-portal", "D-sig"))))
    elif wanted == "Standard" and security.lower() in ONLY_SECURE_VMS:
        kind = ONLY_SECURE_VMS[security.lower()]
        remedy = ("publish the image to a definition with SecurityType TrustedLaunchSupported (Gen 2 or Trusted Launch "
                  "VMs)")
        if kind == "Trusted Launch" and spec.size.cap("trusted_launch") is not False:
            remedy = "pass --security-type TrustedLaunch, or " + remedy
        pf.findings.append(Finding(code="IMAGE_SECURITY_TYPE",
                                   message=f"{label} has SecurityType {security}: only "
                                   f"{kind} VMs can be created from it, and azgpu "
                                   f"creates {size.name} with security type Standard", remedy=remedy,
                                   source=cite(("D-sig",))))
    _end_of_life(pf, label, props.get("endOfLifeDate"))


def check_purchase_plan(pf, spec: Spec, label: str, props: dict) -> None:
    """A custom image built from a Marketplace image carries its purchase plan (GalleryImageProperties.
    purchasePlan, and the community/shared views): the scale set needs it, and its terms must be
    accepted (Learn, "Supply Azure Marketplace purchase plan information when creating images")."""
    plan = PurchasePlan.from_api(props.get("purchasePlan"))
    if plan is None:
        return
    pf.plan = plan
    if plan != spec.image.plan:
        pf.overrides["plan"] = plan
    pf.findings.append(Finding(code="IMAGE_PLAN",
                               message=f"{label} carries purchase plan {plan.name} (product {plan.product}, "
                                             f"publisher {plan.publisher}); azgpu deploys it with the plan", remedy="",
                               source=SOURCE_GALLERY, severity="note"))


def _end_of_life(pf, label: str, date: Any) -> None:
    if not date:
        return
    when = date if isinstance(date, datetime) else datetime.fromisoformat(str(date).replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if when < datetime.now(UTC):
        # "End-of-life dates are informational; users will still be able to create VMs" (D-sig).
        pf.findings.append(Finding(code="IMAGE_END_OF_LIFE",
                                   message=f"{label} reached its end-of-life date {when.date()}",
                                   remedy="use a newer image version", source=cite(("D-sig",)), severity="warning"))


def _latest(versions: list[dict], location: str) -> dict | None:
    """'latest': the highest Major.Minor.Patch not excluded from latest, in general or for this region."""
    eligible = []
    for v in versions:
        props = v.get("properties") or {}
        profile = props.get("publishingProfile") or {}
        regional = next((t for t in profile.get("targetRegions") or []
                         if location_name(t.get("name")) == location_name(location)), {})
        if profile.get("excludeFromLatest") or props.get("excludeFromLatest") or regional.get("excludeFromLatest"):
            continue
        eligible.append(v)
    return max(eligible, key=lambda v: version_key(v.get("name")), default=None)


def _version_args(ref: ImageId, version: str | None = None) -> str:
    """The az sig arguments that name a private gallery's definition (and version), its subscription with them."""
    sub = f" --subscription {ref.subscription}" if ref.subscription else ""
    return (f"-g {ref.resource_group} -r {ref.gallery} -i {ref.definition}" + (f" -e {version}" if version else "")
            + sub)


def check_replication(pf, spec: Spec, label: str, version: dict) -> None:
    """A private gallery version must be replicated, completely, to the location before anything is deployed."""
    loc = spec.request.location
    where = _version_args(spec.image.image_id, version.get("name"))
    props = version.get("properties") or {}
    profile = props.get("publishingProfile") or {}
    regions_listed = profile.get("targetRegions") or []
    targets = {location_name(t.get("name")): t for t in regions_listed}
    name = version.get("name")
    if location_name(loc) not in targets:
        regions = ", ".join(t.get("name", "") for t in targets.values()) or "none"
        pf.findings.append(Finding(
            code="IMAGE_NOT_REPLICATED",
            message=f"{label} version {name} is not replicated to {loc} (its regions: {regions})",
            remedy=f"add {loc} to the version's target regions ('az sig image-version update {where} --add "
            f"publishingProfile.targetRegions name={loc}') and wait for replication, or deploy to one of its regions",
            source=cite(("D-acg",))))
        return
    summary = (props.get("replicationStatus") or {}).get("summary") or []
    status = next((s for s in summary if location_name(s.get("region")) == location_name(loc)), None)
    if status is not None and (status.get("state") or "") != "Completed":
        pf.findings.append(Finding(
            code="IMAGE_REPLICATION_INCOMPLETE",
            message=f"{label} version {name} is still {status.get('state')} "
            f"to {loc} ({status.get('progress', '?')} %): VMs can be deployed "
            "from it only once replication to the region is complete",
            remedy=f"wait, then re-run ('az sig image-version show {where} --expand ReplicationStatus' shows the "
            "progress)",
            source=cite(("D-acg",))))
    replicas = targets[location_name(loc)].get("regionalReplicaCount") or profile.get("replicaCount") or 1
    recommended = max(math.ceil(spec.nodes / VMS_PER_REPLICA), len(spec.scale_sets))
    if replicas < recommended:
        at = next(i for i, t in enumerate(regions_listed) if location_name(t.get("name")) == location_name(loc))
        pf.findings.append(Finding(
            code="GALLERY_REPLICAS_LOW",
            message=f"{label} version {name} has {replicas} replica(s) in {loc}; "
            f"Azure recommends one per 50 VMs and one per scale set created at once, {recommended} for {spec.nodes} "
            f"nodes in {len(spec.scale_sets)} scale set(s)",
            remedy=f"raise the regional replica count to {recommended} ('az sig image-version update {where} --set "
            f"publishingProfile.targetRegions[{at}].regionalReplicaCount={recommended}'), or expect slower or "
            "throttled provisioning", source=cite(("D-acg",)),
            severity="warning"))
    if (profile.get("replicationMode") or "").lower() == "shallow":
        pf.findings.append(Finding(code="IMAGE_SHALLOW_REPLICATION",
                                   message=f"{label} version {name} uses shallow replication, "
                                           "which cannot deploy a large number of VMs",
                                   remedy="publish the version with full replication for clusters",
                                   source=cite(("D-sig",)), severity="warning"))
    _end_of_life(pf, label, profile.get("endOfLifeDate"))


def _gallery(pf, session, spec: Spec, ref: ImageId) -> None:
    compute = session.compute_for(ref.subscription)
    label = f"gallery image {ref.gallery}/{ref.definition}"
    definition = _get(compute.gallery_images.get, ref.resource_group, ref.gallery, ref.definition, cls=_body)
    if definition is None:
        pf.findings.append(Finding(code="IMAGE_NOT_FOUND", message=f"{label} does not exist ({ref.definition_id})",
                                   remedy=f"check the ID ('az sig image-definition list -g {ref.resource_group} -r "
                                   f"{ref.gallery} -o table') and that you can read it", source=SOURCE_GALLERY))
        return
    check_definition(pf, spec, label, definition.get("properties") or {}, SOURCE_GALLERY)
    check_purchase_plan(pf, spec, label, definition.get("properties") or {})
    name = ref.version
    if name is None:
        versions = [_rest(v) for v in compute.gallery_image_versions.list_by_gallery_image(
            ref.resource_group, ref.gallery, ref.definition)]
        latest = _latest(versions, spec.request.location)
        if latest is None:
            pf.findings.append(Finding(code="IMAGE_NOT_FOUND", message=f"{label} has no version that 'latest' can use",
                                       remedy="publish a version, or pass one explicitly "
                                       f"({ref.definition_id}/versions/1.0.0, say)", source=SOURCE_GALLERY))
            return
        name = latest["name"]
    version = _get(compute.gallery_image_versions.get, ref.resource_group, ref.gallery, ref.definition, name,
                   expand="ReplicationStatus", cls=_body)
    if version is None:
        pf.findings.append(Finding(code="IMAGE_NOT_FOUND", message=f"{label} has no version {name}",
                                   remedy="pass an existing version ('az sig image-version list "
                                   f"{_version_args(ref)} -o table') or the definition's ID for the latest "
                                   f"({ref.definition_id})",
                                   source=SOURCE_GALLERY))
        return
    check_replication(pf, spec, label, version)


def _shared(pf, session, spec: Spec, ref: ImageId) -> None:
    """Community and direct-shared galleries: read per location, so a version shows only where it is replicated."""
    community = ref.kind == "community"
    images = session.compute.community_gallery_images if community else session.compute.shared_gallery_images
    versions = session.compute.community_gallery_image_versions if community else \
        session.compute.shared_gallery_image_versions
    loc = spec.request.location
    label = f"{ref.label} {ref.gallery}/{ref.definition}"
    definition = _get(images.get, loc, ref.gallery, ref.definition, cls=_body)
    if definition is None:
        pf.findings.append(Finding(code="IMAGE_NOT_FOUND",
                                   message=f"{label} does not exist or is not shared with this subscription",
                                   remedy="check the ID ('az sig image-definition list-community' / 'list-shared')",
                                   source=SOURCE_GALLERY))
        return
    check_definition(pf, spec, label, definition.get("properties") or {}, SOURCE_GALLERY)
    check_purchase_plan(pf, spec, label, definition.get("properties") or {})
    if ref.version is None:
        listed = [_rest(v) for v in versions.list(loc, ref.gallery, ref.definition)]
        version = _latest(listed, loc)
    else:
        version = _get(versions.get, loc, ref.gallery, ref.definition, ref.version, cls=_body)
    if version is None:
        which = f"version {ref.version}" if ref.version else "no version"
        pf.findings.append(Finding(code="IMAGE_NOT_REPLICATED",
                                   message=f"{label}: {which} is available in {loc} "
                                           "(not published, or not replicated there)",
                                   remedy="ask the gallery's owner to replicate it to "
                                   "this location, or deploy to a location it is replicated to",
                                   source=cite(("D-acg",))))
        return
    props = version.get("properties") or {}
    _end_of_life(pf, label, props.get("endOfLifeDate"))
    state = props.get("imageState")
    if state and state != "Active":
        pf.findings.append(Finding(code="IMAGE_VERSION_STATE",
                                   message=f"{label} version {version.get('name')} is {state}",
                                   remedy="use an active version", source=SOURCE_GALLERY, severity="warning"))


def _managed(pf, session, spec: Spec, ref: ImageId) -> None:
    compute = session.compute_for(ref.subscription)
    label = f"managed image {ref.definition}"
    image = _get(compute.images.get, ref.resource_group, ref.definition, cls=_body)
    if image is None:
        pf.findings.append(Finding(code="IMAGE_NOT_FOUND", message=f"{label} does not exist ({ref.text})",
                                   remedy="check the ID ('az image list -o table')", source=SOURCE_IMAGES))
        return
    loc = spec.request.location
    if location_name(image.get("location")) != location_name(loc):
        pf.findings.append(Finding(code="IMAGE_NOT_REPLICATED",
                                   message=f"{label} is in {image.get('location')}, not in {loc}: a managed "
                                                           "image deploys only in its own region",
                                   remedy="deploy to the image's region, or publish it "
                                   f"to an Azure Compute Gallery replicated to {loc}",
                                   source=cite(("D-managed-image",))))
    props = image.get("properties") or {}
    os_disk = (props.get("storageProfile") or {}).get("osDisk") or {}
    check_definition(pf, spec, label, {"osType": os_disk.get("osType"), "osState": os_disk.get("osState"),
                                       "hyperVGeneration": props.get("hyperVGeneration"),
                                       "features": [{"name": "SecurityType", "value": "Standard"}]}, SOURCE_IMAGES)


CHECKS = {"gallery": _gallery, "community": _shared, "shared": _shared, "managed": _managed}


def check_custom_image(pf, session, spec: Spec) -> None:
    CHECKS[spec.image.image_id.kind](pf, session, spec, spec.image.image_id)


def _identity_create(rid: str) -> str:
    """The az command that makes the identity an ID names (its group and name), quoted."""
    parts = rid.strip("/").split("/")
    if len(parts) >= 8 and parts[2].lower() == "resourcegroups":
        return f"'az identity create -g {parts[3]} -n {parts[-1]}'"
    return "'az identity create'"


def check_identities(pf, session, spec: Spec) -> None:
    """Every --identity exists (a missing one fails the scale set's PUT, FailedIdentityOperation), and the
    caller may assign it: Learn ("Configure managed identities on virtual machine scale sets") needs the
    Managed Identity Operator role (its assign action) on the identity, or the PUT fails with
    LinkedAuthorizationFailed after the network was created."""
    for rid in (spec.identity or {}).get("userAssignedIdentities") or {}:
        if _get(session.resources.resources.get_by_id, rid, api_version=MSI_API) is None:
            pf.findings.append(Finding(code="IDENTITY_NOT_FOUND",
                                       message=f"user-assigned identity {rid} does not exist",
                                       remedy=f"create it ({_identity_create(rid)}) or fix the ID given to --identity",
                                       source=SOURCE_MSI))
            continue
        _check_assign(pf, session, rid)


def _allows(permissions: list[dict], action: str) -> bool:
    """Learn's rule (an action in some permission's actions and not in its notActions), where a '/*/' in
    a pattern also matches a single '/': Managed Identity Operator's ".../userAssignedIdentities/*/assign/
    action" grants the operation ".../userAssignedIdentities/assign/action"."""

    widened = [{"actions": [x for a in p.get("actions") or [] for x in (a, a.replace("/*/", "/"))],
                "notActions": [x for n in p.get("notActions") or [] for x in (n, n.replace("/*/", "/"))]}
               for p in permissions]
    return allowed(widened, action)


def _check_assign(pf, session, rid: str) -> None:
    response = send(session, "GET", f"{rid}{PERMISSIONS.provider_path()}", PERMISSIONS.api_version)
    if response.status_code != 200:
        pf.findings.append(Finding(code="IDENTITY_PERMISSIONS_UNKNOWN",
                                   message="could not read the caller's permissions "
                                   f"on user-assigned identity {rid} (HTTP {response.status_code}): assigning it may "
                                   "still fail at the scale set's PUT",
                                   remedy="", source=SOURCE_PERMISSIONS, severity="warning"))
        return
    permissions = [p for p in json_body(response).get("value") or [] if isinstance(p, dict)]
    if not _allows(permissions, ASSIGN_ACTION):
        pf.findings.append(Finding(
            code="IDENTITY_NOT_ASSIGNABLE",
            message="the caller may not assign user-assigned identity "
            f"{rid} ({ASSIGN_ACTION} is not granted): Azure refuses the scale set with LinkedAuthorizationFailed",
            remedy="grant the identity azgpu runs as the 'Managed Identity Operator' role on the identity (as the user "
            "signed in to the Azure CLI: 'az role assignment create --role \"Managed Identity Operator\" --scope "
            f"{rid} --assignee \"$(az ad signed-in-user show --query id -o tsv)\"'; as a service principal, "
            "--assignee takes its application ID, e.g. \"$AZURE_CLIENT_ID\"), or drop --identity",
            source=SOURCE_PERMISSIONS))


def check_ppg(pf, session, spec: Spec) -> None:
    """An existing proximity placement group (--ppg ID): there, in the location, in a zone the request fits."""
    if not spec.ppg_id:
        return
    from azure.mgmt.core.tools import parse_resource_id

    parts = parse_resource_id(spec.ppg_id)
    ppg = _get(session.compute_for(parts["subscription"]).proximity_placement_groups.get,
               parts["resource_group"], parts["name"])
    if ppg is None:
        pf.findings.append(Finding(code="PPG_NOT_FOUND",
                                   message=f"proximity placement group {spec.ppg_id} does not exist",
                                   remedy="pass an existing group's ID, or a name to have azgpu create one, e.g. "
                                   f"--ppg {spec.names.cluster}-ppg",
                                   source=SOURCE_PPG))
        return
    ppg = _rest(ppg)
    req = spec.request
    if location_name(ppg.get("location")) != location_name(req.location):
        pf.findings.append(Finding(code="PPG_WRONG_LOCATION",
                                   message=f"proximity placement group {parts['name']} is in "
                                                         f"{ppg.get('location')}, the cluster in {req.location}",
                                   remedy="use a group in the cluster's location, or a name to create one, e.g. "
                                   f"--ppg {spec.names.cluster}-ppg",
                                   source=SOURCE_PPG))
    zones = [str(z) for z in ppg.get("zones") or []]
    if zones and req.zone not in zones:
        pf.findings.append(Finding(code="PPG_ZONE_MISMATCH",
                                   message=f"proximity placement group {parts['name']} is pinned to zone "
                                   f"{', '.join(zones)}; the cluster asks for "
                                   f"{'zone ' + req.zone if req.zone else 'no zone'}",
                                   remedy=f"pass --zone {zones[0]}, or use another group", source=cite(("D-ppg",))))
    sizes = ((ppg.get("properties") or {}).get("intent") or {}).get("vmSizes") or []
    if sizes and spec.size.name.lower() not in (s.lower() for s in sizes):
        pf.findings.append(Finding(code="PPG_INTENT_SIZE",
                                   message=f"proximity placement group {parts['name']} was created with intent for "
                                   f"{', '.join(sizes)}, not {spec.size.name}: its datacenter may not have the size",
                                   remedy=f"add {spec.size.name} to the group's intent "
                                          "(with its VMs deallocated), or use another group",
                                   source=cite(("D-ppg",)), severity="warning"))
