"""Scale sets as ARM checks and changes them (the model behind routes/scale_sets.py and
routes/instances.py).

A scale-set PUT or PATCH is checked the way ARM checks it, synchronously, before anything is
accepted: Azure Policy, the identities' linked authorization, SKU availability (409
SkuNotAvailable), immutable properties (409), references (400 InvalidResourceReference), marketplace
image and its generation/architecture, vCPU quota (409 OperationNotAllowed) and subnet room (400
SubnetIsFull); capacity beyond set_capacity's limits fails the operation later (AllocationFailed).
"""

from __future__ import annotations

import copy

from .. import images
from ..errors import ArmError, invalid_reference, required_location
from ..messages import Request, Response
from ..skus import check_bootable, normalize_location
from ..store import parse_id, same_id, stable_uuid
from . import (
    authorization,
    capacity_reservations,
    deployments,
    galleries,
    instances,
    marketplace,
    quota,
    references,
    vertical_connect,
)

VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
EXTENSION_TYPE = "Microsoft.Compute/virtualMachineScaleSets/extensions"


def scale_set_id(backend, rg: str, name: str) -> str:
    return f"{backend.rg_id(rg)}/providers/{VMSS_TYPE}/{name}"


def put(backend, req: Request, sub: str, rg: str, name: str) -> Response:
    """VirtualMachineScaleSets_CreateOrUpdate: checked, then accepted as a long-running operation."""
    backend.require_rg(rg)
    required_location(req.body)
    resource_id = scale_set_id(backend, rg, name)
    previous = backend.find(resource_id)
    resource = backend.new_resource(resource_id, req.body)
    denial = deployments.policy_denial(backend.store, sub, rg, resource)
    if denial is not None:  # Azure Policy evaluates every PUT, with or without a template validation first
        raise ArmError(403, denial["code"], denial["message"],
                       extra={k: v for k, v in denial.items() if k not in ("code", "message")})
    _check_identity_assign(backend, resource)
    _validate(backend, resource, previous)
    return _accept(backend, req, resource, previous)


def patch(backend, req: Request, resource_id: str) -> Response:
    """VirtualMachineScaleSets_Update: the body merged into the stored scale set, checked as a PUT is."""
    previous = backend.require(resource_id)
    resource = _merge(copy.deepcopy(previous), req.body or {})
    _validate(backend, resource, previous)
    return _accept(backend, req, resource, previous)


def delete_instances(backend, req: Request, scale_set: dict) -> Response:
    ids = [str(i) for i in (req.body or {}).get("instanceIds") or []]
    if not ids:
        raise ArmError(400, "InvalidParameter", "Required parameter 'instanceIds' is missing (null).")
    return begin_delete_instances(backend, req, scale_set, ids)


def profile(vmss: dict) -> dict:
    return vmss.get("properties", {}).get("virtualMachineProfile") or {}


def _sku_not_available(size: str, location: str) -> ArmError:
    return ArmError(409, "SkuNotAvailable",
                    "The requested VM size for resource 'Following SKUs "
                    f"have failed for Capacity Restrictions: {size}' is currently not available in location "
                    f"'{location}'. Please try another size or deploy to a different location or different zone. See "
                    "https://aka.ms/azureskunotavailable for details.")


def _check_sku(backend, vmss: dict) -> dict:
    size, location = vmss["sku"]["name"], vmss["location"]
    sku = backend.skus.find(location, size)
    if sku is None:
        raise _sku_not_available(size, location)
    zones = {str(z) for z in vmss.get("zones") or ()}
    offered = {str(z) for info in sku.get("locationInfo", ()) for z in info.get("zones", ())}
    for restriction in sku.get("restrictions") or ():
        info = restriction.get("restrictionInfo") or {}
        if restriction.get("type") == "Location" and location in [normalize_location(v)
                                                                  for v in restriction.get("values", [])]:
            raise _sku_not_available(size, location)
        if restriction.get("type") == "Zone" and zones & {str(z) for z in info.get("zones", ())}:
            raise _sku_not_available(size, location)
    if zones - offered:
        raise _sku_not_available(size, location)
    return sku


def _check_immutable(previous: dict, vmss: dict) -> None:
    old, new = previous["properties"], vmss["properties"]
    if old.get("orchestrationMode", "Uniform").lower() != new.get("orchestrationMode", "Uniform").lower():
        raise ArmError(409, "PropertyChangeNotAllowed", "Changing property 'orchestrationMode' is not allowed.")
    if "singlePlacementGroup" not in new and "singlePlacementGroup" in old:
        new["singlePlacementGroup"] = old["singlePlacementGroup"]  # omitted on update keeps the value
    if old.get("singlePlacementGroup") is False and new.get("singlePlacementGroup") is True:
        raise ArmError(409, "PropertyChangeNotAllowed",
                       "Changing property 'singlePlacementGroup' is not allowed: a scale set can go from a single "
                       "placement group to multiple placement groups, never back.")


def _check_references(backend, vmss: dict) -> None:
    for config in instances.nic_configs(vmss):
        nsg = (config.get("properties", {}).get("networkSecurityGroup") or {}).get("id")
        if nsg and backend.find(nsg) is None:
            raise invalid_reference(nsg, vmss["id"])
        for ipc in instances.ip_configs(config):
            subnet_id = instances.subnet_ref(ipc)
            subnet = backend.find(subnet_id)
            vnet = backend.find(parse_id(subnet_id).parent) if subnet else None
            if subnet is None or vnet is None or vnet["location"] != vmss["location"]:
                raise invalid_reference(subnet_id, vmss["id"])


def _check_image(backend, vmss: dict, sku: dict) -> None:
    ref = (profile(vmss).get("storageProfile") or {}).get("imageReference") or {}
    if not ref.get("publisher"):
        # Gallery, community, shared, managed images; one built from a Marketplace image has its plan.
        _check_plan(backend, vmss, galleries.check_reference(backend, vmss, sku))
        return
    urn = ":".join(ref.get(k, "") for k in ("publisher", "offer", "sku")) + ":" + ref.get("version", "latest")
    image = images.find(backend.store.images, vmss["location"], ref["publisher"], ref.get("offer", ""),
                        ref.get("sku", ""), ref.get("version", "latest"))
    if image is None:
        raise ArmError(404, "PlatformImageNotFound",
                       f"The platform image '{urn}' is not available. Verify that all fields in the storage profile "
                       "are correct. For more details about storage profile information, please refer to "
                       "https://aka.ms/storageprofile")
    props = image["properties"]
    check_bootable(sku, vmss["sku"]["name"], props["hyperVGeneration"], props["architecture"], f"image '{urn}'")
    _check_plan(backend, vmss, images.plan_of(image))


def _check_plan(backend, vmss: dict, plan: dict | None) -> None:
    """A marketplace image with a purchase plan needs the scale set's top-level plan and accepted terms.

    Messages as Azure writes them (GitHub issues quoting the API, e.g. Azure/azure-cli#4233,
    hashicorp/terraform-provider-azurerm#4678; Learn: cli-ps-findimage "Check the purchase plan
    information"). Through the Compute API the missing-terms case also appears as
    ResourcePurchaseValidationFailed; ARM's purchase check reports MarketplacePurchaseEligibilityFailed
    with the same text in its details, which is the code answered here.
    """
    if not plan:
        return
    if not vmss.get("plan"):
        raise ArmError(400, "VMMarketplaceInvalidInput",
                       "Creating a virtual machine from Marketplace image or a custom image sourced from a Marketplace "
                       f"image requires Plan information in the request. VM: '{vmss['id']}'.")
    if marketplace.accepted(backend.store, plan["publisher"], plan["product"], plan["name"]):
        return
    detail = ("User failed validation to purchase resources. Error message: 'You have not accepted the legal terms on "
              f"this subscription: '{backend.subscription_id}' for this plan. Before the subscription can be used, you "
              "need to accept the legal terms of the image. To read and accept legal terms, use the Azure CLI commands "
              "described at https://go.microsoft.com/fwlink/?linkid=2110637 or the PowerShell commands available at "
              "https://go.microsoft.com/fwlink/?linkid=862451. "
              "Alternatively, deploying via the Azure portal provides a UI experience for reading and accepting the "
              f"legal terms. Offer details: publisher='{plan['publisher']}' "
              f"offer = '{plan['product']}', sku = '{plan['name']}'.'")
    # "eligibilty" (sic) is how Azure spells it in this message.
    raise ArmError(400, "MarketplacePurchaseEligibilityFailed",
                   "Marketplace purchase eligibilty check returned errors. See inner errors for details.",
                   details=[{"code": "BadRequest", "message": detail}])


def _allocation_error(backend, vmss: dict, previous: dict | None) -> dict | None:
    """The error a scale set's operation ends with when the simulated capacity cannot hold it.

    Azure accepts the PUT and the operation fails later with AllocationFailed, or
    ZonalAllocationFailed for a zonal request (Learn, "Troubleshoot allocation failures"). Limits
    count the capacity of every scale set of the size in the location (and zone).
    """
    location, size = vmss["location"], vmss["sku"]["name"].lower()
    limits = backend.store.capacity.get(location, {}).get(size)
    wanted = int(vmss["sku"].get("capacity", 0) or 0)
    had = int(((previous or {}).get("sku") or {}).get("capacity", 0) or 0)
    if not limits or wanted <= had:
        return None
    zones = [str(z) for z in vmss.get("zones") or []]
    # Other scale sets hold their capacity whether or not their instances exist yet.
    others = [v for v in backend.store.of_type(VMSS_TYPE)
              if v.get("location") == location and v["sku"]["name"].lower() == size
              and v["id"].lower() != vmss["id"].lower()
              and v.get("properties", {}).get("provisioningState") != "Failed"]
    for zone in [*zones, ""]:
        if zone not in limits:
            continue
        used = sum(int(v["sku"].get("capacity", 0) or 0) for v in others
                   if not zone or zone in [str(z) for z in v.get("zones") or []])
        if used + wanted > limits[zone]:
            where = f"zone {zone} of {location}" if zone else location
            if zone:
                return {"code": "ZonalAllocationFailed",
                        "message": f"Allocation failed. We do not have sufficient capacity for the requested VM size "
                                   f"{vmss['sku']['name']} in this zone ({where}). "
                                   "Read more about improving likelihood of allocation success at "
                                   "http://aka.ms/allocation-guidance"}
            return {"code": "AllocationFailed",
                    "message": f"Allocation failed. We do not have sufficient capacity for the requested VM size "
                               f"{vmss['sku']['name']} in this region ({where}). Read more about improving likelihood "
                               "of allocation success at http://aka.ms/allocation-guidance"}
    return None


def _validate(backend, vmss: dict, previous: dict | None) -> None:
    if not (vmss.get("sku") or {}).get("name"):
        raise ArmError(400, "InvalidParameter", "Required parameter 'sku.name' is missing (null).")
    sku = _check_sku(backend, vmss)
    if previous is not None:
        _check_immutable(previous, vmss)
    vertical_connect.check(vmss)
    _check_references(backend, vmss)
    references.check_ppg(backend, vmss)
    references.check_identities(backend, vmss)
    capacity_reservations.check_scale_set(backend, vmss)
    _check_image(backend, vmss, sku)
    quota.check(backend.store, backend.skus, vmss, previous)
    instances.check_room(backend, vmss, previous)


def _accept(backend, req, vmss: dict, previous: dict | None) -> Response:
    vmss["properties"]["uniqueId"] = stable_uuid(vmss["id"])
    for ext in (profile(vmss).get("extensionProfile") or {}).get("extensions") or []:
        ext["id"] = f"{vmss['id']}/extensions/{ext['name']}"
        ext["type"] = EXTENSION_TYPE
        ext.setdefault("properties", {})["provisioningState"] = "Succeeded"
    return backend.accepted_put(req, vmss, previous is not None, vmss["location"],
                                error=_allocation_error(backend, vmss, previous))


ASSIGN_ACTION = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"


def _check_identity_assign(backend, vmss: dict) -> None:
    """Assigning a user-assigned identity is a linked action on the identity: without it ARM answers 403
    LinkedAuthorizationFailed (Learn, "Configure managed identities on virtual machine scale sets": the
    Managed Identity Operator role). A '/*/' in a granted action also covers the single '/' here."""
    identities = list((vmss.get("identity") or {}).get("userAssignedIdentities") or {})
    if not identities:
        return
    granted = [{"actions": [x for a in p.get("actions") or [] for x in (a, a.replace("/*/", "/"))],
                "notActions": [x for n in p.get("notActions") or [] for x in (n, n.replace("/*/", "/"))]}
               for p in authorization.permissions(backend.store)]
    if any(any(authorization.matches(a, ASSIGN_ACTION) for a in p["actions"]) and
           not any(authorization.matches(n, ASSIGN_ACTION) for n in p["notActions"]) for p in granted):
        return
    principal = stable_uuid("principal", "caller")
    raise ArmError(403, "LinkedAuthorizationFailed",
                   f"The client '{principal}' with object id '{principal}' has permission to perform action "
                   f"'Microsoft.Compute/virtualMachineScaleSets/write' on scope '{vmss['id']}'; however, it does not "
                   f"have permission to perform action(s) '{ASSIGN_ACTION}' on the linked scope(s) "
                   f"'{', '.join(identities)}' (respectively) or the linked scope(s) are invalid.")


def _merge(target: dict, patch: dict) -> dict:
    """JSON merge patch (RFC 7386), which is how ARM applies a PATCH body."""
    for name, value in patch.items():
        if value is None:
            target.pop(name, None)
        elif isinstance(value, dict) and isinstance(target.get(name), dict):
            _merge(target[name], value)
        else:
            target[name] = copy.deepcopy(value)
    return target


def begin_delete_instances(backend, req, scale_set: dict, ids: list[str]) -> Response:
    """Start deleting these instances of the scale set (also what DELETE of one VM does)."""
    present = {vm["instanceId"] for vm in instances.vms(backend, scale_set)}
    for instance in ids:
        if instance not in present:
            # Compute's answer for an id that is not (or no longer) an instance (seen in
            # microsoft/onefuzz#2547 and Azure/azure-cli#25476): 400, not 404.
            raise ArmError(400, "InvalidParameter",
                           f"The provided instanceId {instance} is not an "
                           "active Virtual Machine Scale Set VM instanceId.")
    backend.refuse_while_running(req, scale_set)
    if vertical_connect.applies(scale_set):
        # "Capacity must be a multiple of 18 for SKUs that support vertical connect" (T-gb300-vmss, facts
        # §14.1): the capacity a delete leaves is held to it like any other (vertical_connect.py says why).
        vertical_connect.check_capacity(int(scale_set["sku"].get("capacity", 0) or 0) - len(set(ids)))
    for vm in instances.vms(backend, scale_set):
        if vm["instanceId"] in ids:
            vm["properties"]["provisioningState"] = "Deleting"
    op = backend.begin(req, "deleteInstances", scale_set, scale_set["location"])
    op["instances"] = ids
    return Response(202, None, backend.ops.headers(op))


def _failure(backend, resource_id: str) -> dict | None:
    failed = [op for op in backend.store.operations.values()
              if op["status"] == "Failed" and same_id(op["target"], resource_id)]
    return failed[-1]["error"] if failed else None


def instance_view(backend, resource: dict) -> dict:
    """VirtualMachineScaleSets_GetInstanceView: provisioning state (with the failed operation's error),
    and how many instances and extensions succeeded."""
    state = resource["properties"].get("provisioningState", "Succeeded")
    status = {"code": f"ProvisioningState/{state.lower()}", "level": "Info",
              "displayStatus": f"Provisioning {state.lower()}"}
    error = _failure(backend, resource["id"]) if state == "Failed" else None
    if error:
        status.update(code=f"ProvisioningState/failed/{error['code']}", level="Error", message=error["message"])
    count = len(instances.vms(backend, resource))
    summary = [{"code": "ProvisioningState/succeeded", "count": count}] if count else []
    extensions = (profile(resource).get("extensionProfile") or {}).get("extensions") or []
    return {
        "virtualMachine": {"statusesSummary": summary},
        "extensions": [{"name": e["name"], "statusesSummary": summary} for e in extensions],
        "statuses": [status],
    }


def vm(backend, scale_set: dict, instance: str, vmss: str) -> dict:
    """One instance of the scale set; Compute's 404 NotFound (not ARM's ResourceNotFound) when it is not one."""
    found = backend.find(f"{scale_set['id']}/virtualMachines/{instance}")
    if found is None:
        raise ArmError(404, "NotFound",
                       f"The entity was not found in this Azure location. Instance {instance} of {vmss}.")
    return found


def with_view(vm: dict, backend=None) -> dict:
    """The instance with its instanceView, for an answer: the stored instance is left as it is (its own and its
    properties' dicts are new; the rest is shared, as the answers without $expand share it, and goes on the wire
    under the fake's lock). A deep copy per instance cost about 3 % of a check's CPU (yappi, 1,000 nodes)."""
    out = {**vm, "properties": {**vm["properties"]}}
    out["properties"]["instanceView"] = instances.instance_view(vm)
    if backend is not None:
        out["properties"]["instanceView"].update(vertical_connect.instance_view(backend.store, vm))
    return out


def put_extension(backend, req: Request, scale_set: dict, name: str) -> Response:
    extension_id = f"{scale_set['id']}/extensions/{name}"
    existed = backend.find(extension_id) is not None
    body = {k: v for k, v in (req.body or {}).items() if k not in ("id", "type", "name")}
    extension = {"id": extension_id, "name": name, "type": EXTENSION_TYPE, **copy.deepcopy(body)}
    extension.setdefault("properties", {})
    return backend.accepted_put(req, extension, existed, scale_set["location"])


def extensions(scale_set: dict) -> list[dict]:
    return (profile(scale_set).get("extensionProfile") or {}).get("extensions") or []
