"""Microsoft.Compute scale-set VM actions: Run Command on an instance (models/vm_actions.py)."""

from __future__ import annotations

from ..models import vm_actions
from . import VMSS, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"


@route("POST", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/runCommand")
def run_command(backend, req, sub, rg, vmss, instance):
    return vm_actions.run_command(backend, req, rg, vmss, instance)
