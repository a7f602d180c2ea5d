"""Status URLs of long-running operations: Azure-AsyncOperation (PUT) and Location (DELETE), answered by
models/operations.py."""

from __future__ import annotations

from ..models import operations
from . import AS_STARTED, SUB, route

# A status URL carries the api-version of the request that started its operation.
API_VERSION = AS_STARTED

PROVIDER_LOCATION = SUB + r"/providers/(?P<provider>[^/]+)/locations/(?P<location>[^/]+)"


@route("GET", PROVIDER_LOCATION + r"/operations/(?P<op_id>[^/]+)")
def operation_status(backend, req, sub, provider, location, op_id):
    op = operations.find(backend, op_id)
    return operations.monitor(backend, op) if req.query.get("monitor") == "true" else operations.status(backend, op)


@route("GET", PROVIDER_LOCATION + r"/operationResults/(?P<op_id>[^/]+)")
def provider_operation_result(backend, req, sub, provider, location, op_id):
    return operations.result(backend, operations.find(backend, op_id))


@route("GET", SUB + r"/operationresults/(?P<op_id>[^/]+)")
def operation_result(backend, req, sub, op_id):
    return operations.result(backend, operations.find(backend, op_id))
