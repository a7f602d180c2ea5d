"""Microsoft.Compute scale sets: the scale set and its extensions (URL and body to models/scale_sets.py,
which holds ARM's checks); its instances are routes/instances.py."""

from __future__ import annotations

from ..errors import child_not_found
from ..models import scale_sets
from ..models.scale_sets import VMSS_TYPE
from . import COMPUTE, SUB, VMSS, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"


def _vmss_id(backend, rg: str, name: str) -> str:
    return scale_sets.scale_set_id(backend, rg, name)


@route("PUT", VMSS)
def put_vmss(backend, req, sub, rg, vmss):
    return scale_sets.put(backend, req, sub, rg, vmss)


@route("PATCH", VMSS)
def patch_vmss(backend, req, sub, rg, vmss):
    return scale_sets.patch(backend, req, _vmss_id(backend, rg, vmss))


@route("GET", VMSS)
def get_vmss(backend, req, sub, rg, vmss):
    return Response(200, backend.get_for_read(_vmss_id(backend, rg, vmss)))


@route("DELETE", VMSS)
def delete_vmss(backend, req, sub, rg, vmss):
    backend.require_rg(rg)
    resource = backend.find(_vmss_id(backend, rg, vmss))
    if resource is None:
        return Response(204)
    return backend.accepted_delete(req, resource, resource["location"])


@route("POST", VMSS + r"/delete")
def delete_instances(backend, req, sub, rg, vmss):
    """VirtualMachineScaleSets_DeleteInstances: POST {"instanceIds": [...]}, 202 with a Location
    monitor (REST spec 2024-11-01, VirtualMachineScaleSet_DeleteInstances_MaximumSet_Gen); when
    it ends, the instances are gone and sku.capacity is lower by as many."""
    return scale_sets.delete_instances(backend, req, backend.require(_vmss_id(backend, rg, vmss)))


@route("GET", COMPUTE + r"/virtualMachineScaleSets")
def list_vmss(backend, req, sub, rg):
    backend.require_rg(rg)
    return page(backend.in_group(rg, VMSS_TYPE))


@route("GET", SUB + r"/providers/Microsoft\.Compute/virtualMachineScaleSets")
def list_all_vmss(backend, req, sub):
    return page([r for r in backend.top_level() if r["type"] == VMSS_TYPE])


@route("GET", VMSS + r"/instanceView")
def vmss_instance_view(backend, req, sub, rg, vmss):
    return Response(200, scale_sets.instance_view(backend, backend.get_for_read(_vmss_id(backend, rg, vmss))))


# -- extensions ----------------------------------------------------------------------------------
EXTENSION = VMSS + r"/extensions/(?P<name>[^/]+)"


@route("PUT", EXTENSION)
def put_extension(backend, req, sub, rg, vmss, name):
    return scale_sets.put_extension(backend, req, backend.require(_vmss_id(backend, rg, vmss)), name)


@route("GET", EXTENSION)
def get_extension(backend, req, sub, rg, vmss, name):
    scale_set = backend.require(_vmss_id(backend, rg, vmss))
    extension_id = f"{scale_set['id']}/extensions/{name}"
    backend.ops.touch(extension_id)
    extension = backend.find(extension_id)
    if extension is None:
        raise child_not_found(extension_id)
    return Response(200, extension)


@route("DELETE", EXTENSION)
def delete_extension(backend, req, sub, rg, vmss, name):
    scale_set = backend.require(_vmss_id(backend, rg, vmss))
    extension = backend.find(f"{scale_set['id']}/extensions/{name}")
    if extension is None:
        return Response(204)
    return backend.accepted_delete(req, extension, scale_set["location"])


@route("GET", VMSS + r"/extensions")
def list_extensions(backend, req, sub, rg, vmss):
    return page(scale_sets.extensions(backend.require(_vmss_id(backend, rg, vmss))))
